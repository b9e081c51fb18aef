//! From the model options to a provider registry and a model.
//!
//! Rules, in order:
//! * `--provider faux` is the offline demo.
//! * `--base-url URL` points a model at a server: a registry provider's model (key from its
//!   variable) or, for any other provider id (default `custom`), a model `--model` with the
//!   `--api` adapter (default `openai-completions`) and the key from `PI_API_KEY`, which must
//!   be set (any value for a server that checks none), as the reference's adapters need a key.
//! * `--provider ID` is a registry provider; its key variable must be set.
//! * `--model ID` alone picks the registry provider listing it (preferring one with a key).
//! * Nothing: the first of anthropic, openai, google, ... with a key, else the offline demo.
//!
//! A named provider, model, URL or adapter never falls back to the demo: a missing key or
//! an unknown id is an error naming what to set. With `--proxy URL` requests stream through
//! that pi proxy (token from `--token` or `PI_PROXY_TOKEN`): the model must be named, and no
//! local key is needed because the proxy holds them.

use std::sync::Arc;

use pi_providers::registry::{env_api_key_vars, has_env_credentials, Auth};
use pi_providers::reqwest::Client as HttpClient;
use pi_providers::{catalog, Models, Provider};
use pi_proxy::ProxyStreamFn;
use pi_types::{AssistantMessageEventStream, Layered, Model, StreamFn, StreamLayer, StreamOptions, TranscriptContext};

use crate::args::ModelArgs;
use crate::demo::DemoProvider;
use crate::error::CliError;

/// Provider tried, in order, when none is named, with the model used by default.
pub const DEFAULT_MODELS: [(&str, &str); 6] = [
    ("anthropic", "claude-haiku-4-5"),
    ("openai", "gpt-4.1-mini"),
    ("google", "gemini-2.5-flash"),
    ("deepseek", "deepseek-flash"),
    ("groq", "llama-3.3-70b-versatile"),
    ("openrouter", "~anthropic/claude-haiku-latest"),
];

/// The adapters `--api` accepts.
pub const APIS: [&str; 10] = [
    pi_providers::api::openai::completions::API,
    pi_providers::api::openai::responses::API,
    pi_providers::api::anthropic::API,
    pi_providers::api::google::gemini::API,
    pi_providers::api::google::vertex::API,
    pi_providers::api::bedrock::API,
    pi_providers::api::openai::azure::API,
    pi_providers::api::mistral::API,
    pi_providers::api::openai::codex::API,
    pi_providers::api::pi_messages::API,
];

/// Provider id of the offline demo.
pub const DEMO_PROVIDER: &str = "faux";

/// Time allowed from sending a request to its response headers (the idle limit between
/// chunks is the providers' default).
pub const REQUEST_TIMEOUT_MS: u64 = 120_000;

/// The provider registry the CLI streams through, and the model to start with.
#[derive(Clone)]
pub struct Backend {
    /// Every provider the session can switch between (`/model`), the demo included.
    pub models: Arc<Models>,
    /// The model of the first run.
    pub model: Model,
    /// The proxy requests go through instead of the registry, with its URL.
    pub proxy: Option<(String, ProxyStreamFn)>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("model", &format!("{}/{}", self.model.provider, self.model.id))
            .field("proxy", &self.proxy.as_ref().map(|(url, _)| url))
            .finish()
    }
}

impl Backend {
    /// Whether the model is the offline demo.
    pub fn is_demo(&self) -> bool {
        self.model.provider == DEMO_PROVIDER
    }

    /// The stream function for an agent: the proxy, or the registry with the CLI's request
    /// defaults.
    pub fn stream_fn(&self) -> Arc<dyn StreamFn> {
        match &self.proxy {
            Some((_, proxy)) => Arc::new(proxy.clone()),
            None => Arc::new(Layered::new(DefaultTimeout, Arc::clone(&self.models) as Arc<dyn StreamFn>)),
        }
    }

    /// A provider's failure text as the CLI prints it: "Connection error.: cause" (or the
    /// proxy client's "fetch failed: cause") becomes "cannot reach URL: cause"; through a
    /// proxy, the adapters' "No API key for provider: P" is the proxy's missing key, not ours.
    pub fn describe_failure(&self, model: &Model, message: &str) -> String {
        if let Some((url, _)) = &self.proxy {
            let provider = message
                .strip_prefix("No API key for provider: ")
                .or_else(|| message.strip_prefix("No API key provided for provider ").map(|p| p.trim_matches('"')));
            if let Some(provider) = provider {
                return format!(
                    "the proxy at {url} has no API key for provider `{provider}` (the key is set where the proxy \
                     runs, not here)"
                );
            }
        }
        let (cause, target) = match &self.proxy {
            Some((url, _)) => (message.strip_prefix("fetch failed"), format!("the proxy at {url}")),
            None => {
                let target =
                    if model.base_url.is_empty() { model.provider.to_string() } else { model.base_url.clone() };
                (message.strip_prefix("Connection error."), target)
            }
        };
        match cause.map(|rest| rest.trim_start_matches(':').trim()) {
            Some("") => format!("cannot reach {target}"),
            Some(cause) => format!("cannot reach {target}: {cause}"),
            None => message.to_owned(),
        }
    }

    /// Resolve `provider/model`, `model` or `provider` the way the command line does, for
    /// switching models in a session.
    pub fn switch(&self, spec: &str) -> Result<Model, CliError> {
        let (provider, model) = match spec.split_once('/') {
            Some((provider, model)) if self.models.provider(provider).is_some() => {
                (Some(provider.to_owned()), Some(model.to_owned()))
            }
            _ if self.models.provider(spec).is_some() => (Some(spec.to_owned()), None),
            _ => (None, Some(spec.to_owned())),
        };
        if provider.as_deref() == Some(DEMO_PROVIDER) || provider.as_ref().is_some_and(|p| !is_builtin(p)) {
            let provider = provider.unwrap_or_default();
            let id = model.or_else(|| self.models.models(Some(&provider)).first().map(|m| m.id.to_string()));
            return id
                .and_then(|id| self.models.get_model(&provider, &id))
                .ok_or_else(|| CliError::Usage(format!("unknown model `{spec}`")));
        }
        let args = ModelArgs { provider, model, ..ModelArgs::default() };
        let (provider, model) = registry_model(&args)?;
        if self.proxy.is_none() {
            require_key(&self.models, &provider)?;
        }
        Ok(model)
    }
}

/// The CLI's time-to-headers limit on every request that sets none.
struct DefaultTimeout;

impl StreamLayer for DefaultTimeout {
    fn stream(
        &self,
        inner: &dyn StreamFn,
        model: &Model,
        context: TranscriptContext,
        mut options: StreamOptions,
    ) -> AssistantMessageEventStream {
        options.timeout_ms.get_or_insert(REQUEST_TIMEOUT_MS);
        inner.stream(model, context, options)
    }
}

fn is_builtin(provider: &str) -> bool {
    catalog::catalog().contains_key(provider)
}

/// The offline demo as a registry provider (`faux/faux-1`).
pub fn demo_provider() -> Provider {
    let demo = DemoProvider::new();
    Provider::new(DEMO_PROVIDER).with_model(demo.model()).with_api("faux", Arc::new(demo))
}

/// The built-in providers, their stored credentials (the auth file) first, and the demo.
fn registry() -> Models {
    let models = Models::with_builtins().with_authenticator(crate::login::authenticator().0);
    models.set_provider(demo_provider());
    models
}

/// Whether `provider` has a credential: stored (`pi login`) or in the environment.
fn has_credentials(models: &Models, provider: &str) -> bool {
    let stored = models.authenticator().is_some_and(|auth| matches!(auth.check_auth(provider), Ok(Some(_))));
    stored || has_env_credentials(provider)
}

/// The registry, sending with `http` (the `--env-proxy` client) when there is one.
fn registry_with(http: Option<&HttpClient>) -> Models {
    let models = registry();
    if let Some(client) = http {
        models.set_http_client(Some(client.clone()));
    }
    models
}

/// The client of `--env-proxy` (HTTP(S)_PROXY, ALL_PROXY and NO_PROXY read now), if asked for.
fn env_proxy_client(args: &ModelArgs) -> Result<Option<HttpClient>, CliError> {
    match args.env_proxy {
        true => pi_providers::transport::client::with_env_proxy().map(Some).map_err(|e| CliError::Setup(e.to_string())),
        false => Ok(None),
    }
}

/// Whether `url` is an absolute http(s) URL with a host.
fn is_http_url(url: &str) -> bool {
    ["http://", "https://"].iter().any(|scheme| url.strip_prefix(scheme).is_some_and(|rest| !rest.is_empty()))
}

fn require_key(models: &Models, provider: &str) -> Result<(), CliError> {
    if has_credentials(models, provider) {
        return Ok(());
    }
    let names = env_api_key_vars(provider).join(" or ");
    let message = match provider {
        "amazon-bedrock" => "missing AWS credentials for provider `amazon-bedrock`: set AWS_PROFILE, \
                             AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_BEARER_TOKEN_BEDROCK, ECS container \
                             credentials or AWS_WEB_IDENTITY_TOKEN_FILE"
            .to_owned(),
        "google-vertex" => format!(
            "missing credentials for provider `google-vertex`: set {names}, or application default credentials \
             (GOOGLE_APPLICATION_CREDENTIALS) with GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION"
        ),
        "cloudflare-workers-ai" => {
            "missing credentials for provider `cloudflare-workers-ai`: set CLOUDFLARE_API_KEY and \
             CLOUDFLARE_ACCOUNT_ID"
                .to_owned()
        }
        "cloudflare-ai-gateway" => "missing credentials for provider `cloudflare-ai-gateway`: set CLOUDFLARE_API_KEY, \
                                    CLOUDFLARE_ACCOUNT_ID and CLOUDFLARE_GATEWAY_ID"
            .to_owned(),
        "openai-codex" => "not signed in to provider `openai-codex`: run `pi login openai-codex`".to_owned(),
        _ if names.is_empty() => return Ok(()),
        _ if pi_providers::auth::builtin_flows().iter().any(|(id, _)| *id == provider) => {
            format!("missing credentials for provider `{provider}`: run `pi login {provider}`, or set {names}")
        }
        _ => format!("missing API key for provider `{provider}`: set {names}, or run `pi login {provider}`"),
    };
    Err(CliError::Setup(message))
}

fn check_api(api: &str) -> Result<(), CliError> {
    if APIS.contains(&api) {
        return Ok(());
    }
    Err(CliError::Usage(format!("unknown API `{api}`; choose one of {}", APIS.join(", "))))
}

fn default_model_of(provider: &str) -> Option<String> {
    DEFAULT_MODELS
        .iter()
        .find(|(p, _)| *p == provider)
        .map(|(_, m)| (*m).to_owned())
        .or_else(|| catalog::models(provider).first().map(|m| m.id.to_string()))
}

/// A registry model (provider named or found from the model id), without a key check.
fn registry_model(args: &ModelArgs) -> Result<(String, Model), CliError> {
    let provider = match (&args.provider, &args.model) {
        (Some(provider), _) => {
            if !is_builtin(provider) {
                return Err(CliError::Usage(format!(
                    "unknown provider `{provider}` (`pi models` lists the {} built-in providers; `faux` is the \
                     offline demo; use --base-url for another server)",
                    catalog::catalog().len()
                )));
            }
            provider.clone()
        }
        (None, Some(model)) => {
            let listing: Vec<&str> =
                catalog::provider_ids().into_iter().filter(|p| catalog::model(p, model).is_some()).collect();
            // Several providers list many ids (gpt-4o: openai, azure, github-copilot, ...): the
            // one with credentials, else the model's first-party provider, else the first.
            let with_key = listing.iter().find(|p| has_env_credentials(p));
            let first_party = DEFAULT_MODELS.iter().map(|(p, _)| p).find(|p| listing.contains(p));
            match with_key.or(first_party).or(listing.first()) {
                Some(provider) => (*provider).to_owned(),
                None => {
                    return Err(CliError::Usage(format!(
                        "unknown model `{model}` (no provider lists it; name one with --provider, or a server with \
                         --base-url)"
                    )))
                }
            }
        }
        (None, None) => return Err(CliError::Setup("no provider or model named".into())),
    };
    let Some(id) = args.model.clone().or_else(|| default_model_of(&provider)) else {
        return Err(CliError::Setup(format!("provider `{provider}` has no models; name one with --model")));
    };
    let mut model = catalog::model(&provider, &id)
        .ok_or_else(|| CliError::Usage(format!("unknown model `{id}` for provider `{provider}`")))?;
    if let Some(api) = &args.api {
        check_api(api)?;
        model.api = api.as_str().into();
    }
    Ok((provider, model))
}

/// A model on a server the user named with `--base-url` (keys checked unless a proxy
/// holds them).
fn server_model(args: &ModelArgs, base_url: &str, models: &Models, check_keys: bool) -> Result<Model, CliError> {
    let base_url = base_url.trim_end_matches('/');
    if !is_http_url(base_url) {
        return Err(CliError::Usage(format!("--base-url must be an http:// or https:// URL, not `{base_url}`")));
    }
    let provider = args.provider.clone().unwrap_or_else(|| "custom".to_owned());
    if provider == DEMO_PROVIDER {
        return Err(CliError::Usage("--base-url cannot be used with the faux provider".into()));
    }
    if is_builtin(&provider) {
        let (provider, mut model) = registry_model(args)?;
        if check_keys {
            require_key(models, &provider)?;
        }
        model.base_url = base_url.to_owned();
        let Some(builtin) = Provider::builtin(&provider) else {
            return Err(CliError::Setup(format!("unknown provider `{provider}`")));
        };
        models.set_provider(builtin.with_model(model.clone()));
        return Ok(model);
    }
    let Some(id) = args.model.clone() else {
        return Err(CliError::Usage("--base-url needs --model (the model id the server serves)".into()));
    };
    let api = args.api.clone().unwrap_or_else(|| pi_providers::api::openai::completions::API.to_owned());
    check_api(&api)?;
    let model = Model {
        base_url: base_url.to_owned(),
        context_window: 128_000,
        max_tokens: 16_384,
        ..Model::new(id).with_api(api).with_provider(provider.clone())
    };
    // The key is PI_API_KEY. Without it the request would fail in the adapter as the
    // reference's does ("No API key for provider: custom"): say so before sending anything,
    // rather than invent a key. Bedrock without PI_API_KEY authenticates itself
    // (AWS_BEARER_TOKEN_BEDROCK, AWS credentials); through a proxy the proxy holds the keys.
    let key = std::env::var("PI_API_KEY").ok().filter(|k| !k.is_empty());
    let auth = match key {
        Some(key) => Auth::ApiKey(key),
        None if model.api == pi_providers::api::bedrock::API || !check_keys => Auth::None,
        None => {
            return Err(CliError::Setup(format!(
                "missing API key for the server at {base_url}: set PI_API_KEY (a server that checks no key \
                 accepts any value, e.g. PI_API_KEY=none)"
            )))
        }
    };
    models.set_provider(Provider::new(provider).with_auth(auth).with_model(model.clone()).with_http_apis());
    Ok(model)
}

/// The proxy of `--proxy` / `--token` (or `PI_PROXY_TOKEN`), if one is named.
fn proxy(args: &ModelArgs, http: Option<&HttpClient>) -> Result<Option<(String, ProxyStreamFn)>, CliError> {
    let Some(url) = &args.proxy else {
        if args.token.is_some() {
            return Err(CliError::Usage("--token needs --proxy URL".into()));
        }
        return Ok(None);
    };
    let url = url.trim_end_matches('/');
    if !is_http_url(url) {
        return Err(CliError::Usage(format!("--proxy must be an http:// or https:// URL, not `{url}`")));
    }
    let token = args.token.clone().or_else(|| std::env::var("PI_PROXY_TOKEN").ok()).filter(|t| !t.is_empty());
    let Some(token) = token else {
        return Err(CliError::Usage("--proxy needs --token TOKEN (or PI_PROXY_TOKEN)".into()));
    };
    let client = match http {
        Some(http) => ProxyStreamFn::new(url, token).with_http_client(http.clone()),
        None => ProxyStreamFn::new(url, token),
    };
    Ok(Some((url.to_owned(), client)))
}

/// Resolve the command line's model options. With `--proxy`, a provider or model the
/// built-in catalog does not know is looked up in what the proxy serves (`GET /api/models`).
pub async fn resolve(args: &ModelArgs) -> Result<Backend, CliError> {
    let http = env_proxy_client(args)?;
    let local = resolve_locally(args, http.as_ref());
    let served_only = args.proxy.is_some()
        && args.base_url.is_none()
        && args.api.is_none()
        && args.provider.as_deref() != Some(DEMO_PROVIDER)
        && (args.provider.is_some() || args.model.is_some())
        && registry_model(args).is_err();
    if !served_only {
        return local;
    }
    let Some((url, client)) = proxy(args, http.as_ref())? else { return local };
    let served = fetch_served(&url, &client).await?;
    let model = pick_served(args, &served, &url)?;
    Ok(Backend { models: Arc::new(registry_with(http.as_ref())), model, proxy: Some((url, client)) })
}

/// The models the proxy of `--proxy` serves, with its URL.
pub async fn served_models(args: &ModelArgs) -> Result<(String, Vec<Model>), CliError> {
    let Some((url, client)) = proxy(args, env_proxy_client(args)?.as_ref())? else {
        return Err(CliError::Usage("no --proxy URL named".into()));
    };
    let served = fetch_served(&url, &client).await?;
    Ok((url, served))
}

async fn fetch_served(url: &str, client: &ProxyStreamFn) -> Result<Vec<Model>, CliError> {
    client.models().await.map_err(|error| {
        let message = error.to_string();
        match message.strip_prefix("fetch failed") {
            Some(cause) => {
                let cause = cause.trim_start_matches(':').trim();
                CliError::Setup(format!("cannot reach the proxy at {url}: {cause}"))
            }
            None => CliError::Setup(format!("cannot list the models of the proxy at {url}: {message}")),
        }
    })
}

/// The served model `--provider` / `--model` name: by provider and id, by id alone (one
/// provider serving it, or `provider/id`), or a provider's first model.
fn pick_served(args: &ModelArgs, served: &[Model], url: &str) -> Result<Model, CliError> {
    let find = |provider: &str, id: Option<&str>| {
        served.iter().find(|m| m.provider == provider && id.is_none_or(|id| m.id == id)).cloned()
    };
    let found = match (&args.provider, &args.model) {
        (Some(provider), Some(id)) => find(provider, Some(id)),
        (Some(provider), None) => find(provider, None),
        (None, Some(id)) => {
            let matching: Vec<&Model> = served.iter().filter(|m| m.id == id.as_str()).collect();
            match matching.as_slice() {
                [one] => Some((*one).clone()),
                [first, second, ..] => {
                    return Err(CliError::Usage(format!(
                        "model `{id}` is served by several providers of the proxy at {url} ({}, {}, ...); name one \
                         with --provider",
                        first.provider, second.provider
                    )))
                }
                [] => id.split_once('/').and_then(|(provider, id)| find(provider, Some(id))),
            }
        }
        (None, None) => None,
    };
    found.ok_or_else(|| {
        let what = match (&args.provider, &args.model) {
            (Some(provider), Some(id)) => format!("model `{id}` of provider `{provider}`"),
            (Some(provider), None) => format!("provider `{provider}`"),
            (None, Some(id)) => format!("model `{id}`"),
            (None, None) => "model".to_owned(),
        };
        CliError::Usage(format!(
            "unknown {what}: neither the built-in catalog nor the proxy at {url} has it (`pi models --proxy {url}` \
             lists what the proxy serves)"
        ))
    })
}

/// Resolve the command line's model options from the built-in catalog.
fn resolve_locally(args: &ModelArgs, http: Option<&HttpClient>) -> Result<Backend, CliError> {
    let proxy = proxy(args, http)?;
    let check_keys = proxy.is_none();
    let models = registry_with(http);
    let model = if args.provider.as_deref() == Some(DEMO_PROVIDER) {
        if args.base_url.is_some() || args.api.is_some() {
            return Err(CliError::Usage("--base-url and --api cannot be used with the faux provider".into()));
        }
        let id = args.model.clone().unwrap_or_else(|| "faux-1".to_owned());
        models
            .get_model(DEMO_PROVIDER, &id)
            .ok_or_else(|| CliError::Usage(format!("unknown model `{id}` for provider `faux` (it has faux-1)")))?
    } else if let Some(base_url) = &args.base_url {
        server_model(args, base_url, &models, check_keys)?
    } else if args.provider.is_some() || args.model.is_some() {
        let (provider, model) = registry_model(args)?;
        if check_keys {
            require_key(&models, &provider)?;
        }
        model
    } else if args.api.is_some() {
        return Err(CliError::Usage("--api needs --base-url, --provider or --model".into()));
    } else if proxy.is_some() {
        return Err(CliError::Usage("--proxy needs the model: --provider and/or --model".into()));
    } else {
        match DEFAULT_MODELS.iter().find(|(provider, _)| has_credentials(&models, provider)) {
            Some((provider, _)) => {
                let args = ModelArgs { provider: Some((*provider).to_owned()), ..args.clone() };
                registry_model(&args)?.1
            }
            None => models
                .get_model(DEMO_PROVIDER, "faux-1")
                .ok_or_else(|| CliError::Setup("the offline demo model is missing".into()))?,
        }
    };
    Ok(Backend { models: Arc::new(models), model, proxy })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pi --provider P --model M` names every catalog entry, and its API has an adapter in
    /// the registry the CLI streams through.
    #[test]
    fn every_catalog_model_resolves_by_provider_and_id() {
        let models = registry();
        for (provider, list) in catalog::catalog() {
            for entry in list {
                let args = ModelArgs {
                    provider: Some(provider.clone()),
                    model: Some(entry.id.to_string()),
                    ..Default::default()
                };
                let (resolved_provider, model) = registry_model(&args).unwrap_or_else(|e| panic!("{provider}: {e:?}"));
                assert_eq!((resolved_provider.as_str(), &model), (provider.as_str(), entry));
                let registered = models.provider(provider).unwrap_or_else(|| panic!("{provider} registered"));
                assert!(registered.api(&model.api).is_some(), "{provider}/{}: no adapter for {}", model.id, model.api);
            }
        }
    }

    #[test]
    fn a_model_id_alone_prefers_its_first_party_provider() {
        let args = ModelArgs { model: Some("gpt-4o".into()), ..Default::default() };
        if !catalog::provider_ids().iter().any(|p| *p != "openai" && has_env_credentials(p)) {
            assert_eq!(registry_model(&args).map(|(p, _)| p).ok().as_deref(), Some("openai"));
        }
    }
}
