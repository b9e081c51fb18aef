//! Radius' live catalog: `GET <gateway>/v1/config` (bearer: the sign-in's access token or the
//! `RADIUS_API_KEY`) answers `{"baseUrl", "models": [...], "classifiers": [...]}`. Its chat
//! models are served over `pi-messages` and its classifiers over `pi-decision`, both at the
//! config's `baseUrl`. Organization owners can disable models, so once known this catalog
//! replaces the shipped one instead of overlaying it; the shipped one (only for the default
//! gateway) covers the time before any catalog exists. Entries missing a required field are
//! dropped, as the reference's sanitizer drops them.

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::{AnyModel, ModelSource, ModelsStoreError, RefreshContext};
use crate::auth::radius::{normalize_gateway_url, DEFAULT_GATEWAY};
use crate::auth::web;
use crate::registry::Provider;
use crate::transport::redact::Redactor;

/// The catalog of one gateway.
#[derive(Clone, Debug)]
pub struct RadiusCatalog {
    provider_id: String,
    gateway: String,
    http_client: Option<reqwest::Client>,
}

impl Default for RadiusCatalog {
    fn default() -> Self {
        Self::new("radius", DEFAULT_GATEWAY)
    }
}

impl RadiusCatalog {
    /// The catalog of `gateway` (scheme optional) for the provider `provider_id`.
    pub fn new(provider_id: impl Into<String>, gateway: &str) -> Self {
        Self { provider_id: provider_id.into(), gateway: normalize_gateway_url(gateway), http_client: None }
    }

    /// Send the request with `client`.
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    /// The models of a config answer; `None` when it is not a config.
    pub fn models_of(&self, config: &Value) -> Option<Vec<AnyModel>> {
        let config = config.as_object()?;
        let base_url = config.get("baseUrl")?.as_str()?;
        let models = config.get("models")?.as_array()?;
        let with = |model: &Map<String, Value>, extra: &[(&str, &str)]| {
            let mut model = model.clone();
            for (key, value) in extra {
                model.insert((*key).to_owned(), Value::String((*value).to_owned()));
            }
            AnyModel::from_value(Value::Object(model))
        };
        let id = self.provider_id.as_str();
        let chat = models
            .iter()
            .filter_map(|m| m.as_object().filter(|m| is_chat_model(m)))
            .filter_map(|m| with(m, &[("api", "pi-messages"), ("provider", id), ("baseUrl", base_url)]));
        let classifiers = config.get("classifiers").and_then(Value::as_array).into_iter().flatten();
        let classifiers =
            classifiers.filter_map(|m| m.as_object().filter(|m| is_classifier_model(m))).filter_map(|m| {
                with(m, &[("type", "classifier"), ("api", "pi-decision"), ("provider", id), ("baseUrl", base_url)])
            });
        Some(chat.chain(classifiers).collect())
    }
}

fn is_classifier_model(model: &Map<String, Value>) -> bool {
    model.get("id").is_some_and(Value::is_string)
        && model.get("name").is_some_and(Value::is_string)
        && model.get("input").is_some_and(Value::is_array)
        && model.get("cost").is_some_and(Value::is_object)
        && model.get("contextWindow").is_some_and(Value::is_number)
}

fn is_chat_model(model: &Map<String, Value>) -> bool {
    is_classifier_model(model)
        && model.get("reasoning").is_some_and(Value::is_boolean)
        && model.get("maxTokens").is_some_and(Value::is_number)
}

/// A failed answer's body for an error text: trimmed, at most 512 characters.
fn truncated(text: &str) -> String {
    let trimmed = text.trim();
    match trimmed.char_indices().nth(512) {
        Some((end, _)) => format!("{}…", &trimmed[..end]),
        None => trimmed.to_owned(),
    }
}

impl ModelSource for RadiusCatalog {
    fn fetch<'a>(&'a self, context: &'a RefreshContext) -> BoxFuture<'a, Result<Vec<AnyModel>, ModelsStoreError>> {
        Box::pin(async move {
            let gateway = &self.gateway;
            let client = web::client(self.http_client.as_ref()).map_err(ModelsStoreError::Source)?;
            let mut request = client.get(format!("{gateway}/v1/config")).header("accept", "application/json");
            if let Some(token) = context.token() {
                request = request.bearer_auth(token);
            }
            let answer = web::send(request, web::REQUEST_TIMEOUT).await.map_err(ModelsStoreError::Source)?;
            if !answer.ok() {
                // A server may quote the request back: the token never reaches the error text
                // (redacted before the cut, so no cut leaves a piece of it).
                let body = String::from_utf8_lossy(&answer.body);
                let body = truncated(&Redactor::new(context.token()).text(&body));
                return Err(ModelsStoreError::Source(format!(
                    "Could not load Radius config from {gateway}: {}: {body}",
                    answer.status
                )));
            }
            answer
                .json()
                .and_then(|config| self.models_of(&config))
                .ok_or_else(|| ModelsStoreError::Source(format!("Invalid Radius config from {gateway}")))
        })
    }

    fn replaces_baseline(&self) -> bool {
        true
    }
}

/// The Radius provider `provider_id` of `gateway`, as the built-in `radius` is for the default
/// gateway: the shipped catalog only for the default gateway, the live one once refreshed, the
/// HTTP APIs, its key from `RADIUS_API_KEY` (a stored sign-in wins, see [`crate::auth`]).
pub fn provider(provider_id: &str, gateway: &str, http_client: Option<reqwest::Client>) -> Provider {
    let normalized = normalize_gateway_url(gateway);
    let mut catalog = RadiusCatalog::new(provider_id, &normalized);
    if let Some(client) = http_client {
        catalog = catalog.with_http_client(client);
    }
    let shipped = if normalized == normalize_gateway_url(DEFAULT_GATEWAY) {
        crate::catalog::models("radius").into_iter().map(|model| model.with_provider(provider_id.to_owned())).collect()
    } else {
        Vec::new()
    };
    Provider::new(provider_id)
        .with_name("Radius")
        .with_auth(crate::registry::Auth::Env(vec!["RADIUS_API_KEY".into()]))
        .with_models(shipped)
        .with_http_apis()
        .with_model_source(std::sync::Arc::new(catalog))
}
