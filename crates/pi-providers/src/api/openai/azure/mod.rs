//! Azure OpenAI Responses (`azure-openai-responses`).
//!
//! The OpenAI Responses protocol served by an Azure OpenAI resource:
//! `POST <base>/responses?api-version=<version>` with the key in an `api-key` header (never
//! `Authorization`), a JSON body whose `model` is the Azure *deployment* name, and the same
//! server-sent event stream as OpenAI's Responses API (see [`crate::api::openai::responses`], whose
//! request conversion and stream processing this adapter shares).
//!
//! Settings, each first from the adapter's own fields, then from [`StreamOptions::env_var`]
//! (the request's `env`, then the process environment):
//!
//! * base URL: [`AzureOpenAIResponses::base_url`] or `AZURE_OPENAI_BASE_URL`; else a resource
//!   name ([`AzureOpenAIResponses::resource_name`] or `AZURE_OPENAI_RESOURCE_NAME`) gives
//!   `https://<name>.openai.azure.com/openai/v1`; else the model's `baseUrl`. On an Azure host
//!   (`*.openai.azure.com`, `*.cognitiveservices.azure.com`, `*.ai.azure.com`) an empty,
//!   `/openai` or `/openai/v1/responses` path becomes `/openai/v1`.
//! * API version: [`AzureOpenAIResponses::api_version`] or `AZURE_OPENAI_API_VERSION`, default
//!   `v1`.
//! * deployment: [`AzureOpenAIResponses::deployment_name`], else the model's entry in
//!   `AZURE_OPENAI_DEPLOYMENT_NAME_MAP` (`model-id=deployment,...`), else the model id.
//!
//! The key is the request's `api_key` (the registry resolves `AZURE_OPENAI_API_KEY`).

use indexmap::IndexMap;
use pi_types::transcript::{resolve_transcript, resolve_transcript_tools};
use pi_types::{AssistantMessageEventStream, Model, StreamFn, StreamOptions, TranscriptContext};
use serde_json::{json, Map, Value};

use crate::api::driver::{self, Call, Cancel, Exchange, WireApi};
use crate::api::openai;
use crate::api::openai::responses::{
    self, convert_messages, convert_tools, grammar_inputs, Compat, Endpoint, Flavor, ResponsesDecode, ResponsesDialect,
    TierPricing, RESPONSES_CANCEL,
};
use crate::api::own_options;
use crate::api::request_options;
use crate::api::support::{self as adapter_support, Stop};
use crate::js_json;

/// The API id.
pub const API: &str = "azure-openai-responses";

mod options;
pub use options::AzureOpenAIResponsesOptions;

/// Stream with the API's own options, as the reference's `stream()` (through a default
/// [`AzureOpenAIResponses`], configured by `api` and the `AZURE_OPENAI_*` variables): nothing is
/// derived from `options.reasoning`, and `max_output_tokens` is sent only when
/// `options.max_tokens` is set.
pub fn stream(
    model: &Model,
    context: TranscriptContext,
    options: StreamOptions,
    api: AzureOpenAIResponsesOptions,
) -> AssistantMessageEventStream {
    own_options::stream_own(&AzureOpenAIResponses::default(), model, context, options, api)
}

/// The API version sent when none is configured.
pub const DEFAULT_API_VERSION: &str = "v1";

const MIN_OUTPUT_TOKENS: u64 = 16;
const TOOL_CALL_PROVIDERS: [&str; 4] = ["openai", "openai-codex", "opencode", "azure"];
const ERROR_PREFIX: &str = "Azure OpenAI API error";

/// The Azure OpenAI Responses adapter.
///
/// The fields are the reference's per-call Azure options (`azureBaseUrl`,
/// `azureResourceName`, `azureApiVersion`, `azureDeploymentName`); they win over the
/// environment. [`StreamOptions`] is shared by every API, so they live here.
#[derive(Clone, Debug, Default)]
pub struct AzureOpenAIResponses {
    /// Base URL of the resource's OpenAI API (e.g. `https://x.openai.azure.com/openai/v1`).
    pub base_url: Option<String>,
    /// Resource name, used when no base URL is set.
    pub resource_name: Option<String>,
    /// The `api-version` query parameter.
    pub api_version: Option<String>,
    /// The deployment to send as the request's `model`.
    pub deployment_name: Option<String>,
}

impl AzureOpenAIResponses {
    /// Use this base URL.
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = Some(base_url.into());
        self
    }

    /// Use this resource name (when no base URL is set).
    pub fn with_resource_name(mut self, resource_name: impl Into<String>) -> Self {
        self.resource_name = Some(resource_name.into());
        self
    }

    /// Send this API version.
    pub fn with_api_version(mut self, api_version: impl Into<String>) -> Self {
        self.api_version = Some(api_version.into());
        self
    }

    /// Send this deployment name as the request's `model`.
    pub fn with_deployment_name(mut self, deployment_name: impl Into<String>) -> Self {
        self.deployment_name = Some(deployment_name.into());
        self
    }

    /// The deployment a request for `model` goes to.
    pub fn resolve_deployment_name(&self, model: &Model, options: &StreamOptions) -> String {
        let api = own_options::lookup::<AzureOpenAIResponsesOptions>(model, options);
        if let Some(name) = api.field(|api| &api.azure_deployment_name).filter(|n| !n.is_empty()) {
            return name;
        }
        if let Some(name) = self.deployment_name.as_ref().filter(|n| !n.is_empty()) {
            return name.clone();
        }
        options
            .env_var("AZURE_OPENAI_DEPLOYMENT_NAME_MAP")
            .and_then(|map| parse_deployment_map(&map).shift_remove(model.id.as_str()))
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| model.id.to_string())
    }

    /// The normalized base URL a request for `model` goes to, or the configuration error.
    pub fn resolve_base_url(&self, model: &Model, options: &StreamOptions) -> Result<String, String> {
        let api = own_options::lookup::<AzureOpenAIResponsesOptions>(model, options);
        let base = api
            .field(|api| &api.azure_base_url)
            .as_deref()
            .or(self.base_url.as_deref())
            .map(js_json::js_trim)
            .filter(|b| !b.is_empty())
            .map(str::to_owned)
            .or_else(|| {
                options
                    .env_var("AZURE_OPENAI_BASE_URL")
                    .map(|b| js_json::js_trim(&b).to_owned())
                    .filter(|b| !b.is_empty())
            });
        let resource = api
            .field(|api| &api.azure_resource_name)
            .filter(|r| !r.is_empty())
            .or_else(|| self.resource_name.clone().filter(|r| !r.is_empty()))
            .or_else(|| options.env_var("AZURE_OPENAI_RESOURCE_NAME"));
        let resolved = base
            .or_else(|| resource.map(|name| format!("https://{name}.openai.azure.com/openai/v1")))
            .or_else(|| Some(model.base_url.clone()).filter(|b| !b.is_empty()))
            .ok_or_else(|| {
                "Azure OpenAI base URL is required. Set AZURE_OPENAI_BASE_URL or AZURE_OPENAI_RESOURCE_NAME, or pass \
                 azureBaseUrl, azureResourceName, or model.baseUrl."
                    .to_owned()
            })?;
        normalize_base_url(&resolved)
    }

    /// The API version a request sends.
    pub fn resolve_api_version(&self, model: &Model, options: &StreamOptions) -> String {
        own_options::lookup::<AzureOpenAIResponsesOptions>(model, options)
            .field(|api| &api.azure_api_version)
            .filter(|v| !v.is_empty())
            .or_else(|| self.api_version.clone().filter(|v| !v.is_empty()))
            .or_else(|| options.env_var("AZURE_OPENAI_API_VERSION"))
            .unwrap_or_else(|| DEFAULT_API_VERSION.to_owned())
    }

    /// The request URL: `<base>/responses` with `api-version` added to the base URL's query.
    pub fn request_url(&self, model: &Model, options: &StreamOptions) -> Result<String, String> {
        let base = self.resolve_base_url(model, options)?;
        Ok(responses_url(&base, &self.resolve_api_version(model, options)))
    }

    /// The request body the adapter sends for a context (its deployment as the `model`).
    /// Public so that an application can see what its model and options put on the wire without a
    /// server (this crate's own tests of the request fields use it, and cannot reach private items);
    /// the body is the one sent when no `on_payload` hook changes it.
    pub fn build_request_body(&self, model: &Model, context: &TranscriptContext, options: &StreamOptions) -> Value {
        let compat = compat(model);
        let context = resolve_transcript(context.clone(), compat.supports_mid_convo_system_messages);
        build_params(model, &context, options, &compat, &self.resolve_deployment_name(model, options))
    }
}

/// `model-id=deployment` pairs separated by commas; malformed entries are skipped, a later
/// entry for the same model wins.
fn parse_deployment_map(value: &str) -> IndexMap<String, String> {
    let mut map = IndexMap::new();
    for entry in value.split(',') {
        let entry = js_json::js_trim(entry);
        if entry.is_empty() {
            continue;
        }
        let mut parts = entry.split('=');
        let (Some(id), Some(deployment)) = (parts.next(), parts.next()) else { continue };
        if id.is_empty() || deployment.is_empty() {
            continue;
        }
        map.insert(js_json::js_trim(id).to_owned(), js_json::js_trim(deployment).to_owned());
    }
    map
}

fn is_azure_host(host: &str) -> bool {
    [".openai.azure.com", ".cognitiveservices.azure.com", ".ai.azure.com"].iter().any(|suffix| host.ends_with(suffix))
}

/// The reference's `normalizeAzureBaseUrl`.
fn normalize_base_url(raw: &str) -> Result<String, String> {
    let trimmed = js_json::js_trim(raw).trim_end_matches('/');
    let mut url = reqwest::Url::parse(trimmed).map_err(|_| format!("Invalid Azure OpenAI base URL: {raw}"))?;
    let path = url.path().trim_end_matches('/').to_owned();
    if url.host_str().is_some_and(is_azure_host) && matches!(path.as_str(), "" | "/openai" | "/openai/v1/responses") {
        url.set_path("/openai/v1");
        url.set_query(None);
    }
    Ok(url.to_string().trim_end_matches('/').to_owned())
}

/// JavaScript's `encodeURIComponent`.
fn encode_component(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The URL the SDK builds from a base URL, the `/responses` path and its `api-version`
/// default query: a query already on the base URL is kept, `api-version` replaces a value of
/// the same name.
fn responses_url(base: &str, api_version: &str) -> String {
    let (base, query) = match base.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (base, None),
    };
    let base = base.split('#').next().unwrap_or(base);
    let mut params: IndexMap<String, String> = IndexMap::new();
    if let Some(query) = query {
        let query = query.split('#').next().unwrap_or(query);
        if let Ok(parsed) = reqwest::Url::parse(&format!("http://x/?{query}")) {
            for (k, v) in parsed.query_pairs() {
                params.insert(k.into_owned(), v.into_owned());
            }
        }
    }
    params.insert("api-version".to_owned(), api_version.to_owned());
    let path = if base.ends_with('/') { "responses" } else { "/responses" };
    let query: Vec<String> =
        params.iter().map(|(k, v)| format!("{}={}", encode_component(k), encode_component(v))).collect();
    format!("{base}{path}?{}", query.join("&"))
}

fn compat(model: &Model) -> Compat {
    let mut compat = Compat::for_model(model);
    compat.supports_strict_mode =
        model.compat.as_ref().and_then(|c| c.get("supportsStrictMode")).and_then(Value::as_bool).unwrap_or(true);
    compat.tool_call_providers = &TOOL_CALL_PROVIDERS;
    compat
}

fn build_params(
    model: &Model,
    context: &TranscriptContext,
    options: &StreamOptions,
    compat: &Compat,
    deployment: &str,
) -> Value {
    let tools = resolve_transcript_tools(context.messages(), compat.tool_support());
    let input = convert_messages(model, context, compat, None);
    let api = own_options::lookup::<AzureOpenAIResponsesOptions>(model, options);
    let max_tokens = match api.is_own() {
        true => options.max_tokens.unwrap_or(0),
        false => request_options::base_max_tokens(model, context, options.max_tokens),
    };
    let mut params = Map::new();
    params.insert("model".into(), json!(deployment));
    params.insert("input".into(), Value::Array(input));
    params.insert("stream".into(), json!(true));
    if compat.prompt_cache_key_mode != "disabled" {
        if let Some(session) = &options.session_id {
            params.insert("prompt_cache_key".into(), json!(session.chars().take(64).collect::<String>()));
        }
    }
    params.insert("store".into(), json!(false));
    if max_tokens > 0 {
        params.insert("max_output_tokens".into(), json!(max_tokens.max(MIN_OUTPUT_TOKENS)));
    }
    if let Some(t) = options.temperature {
        params.insert("temperature".into(), json!(t));
    }
    if !tools.request_tools.is_empty() {
        params.insert("tools".into(), Value::Array(convert_tools(&tools.request_tools, compat, false)));
    }
    responses::insert_choice_and_reasoning::<AzureOpenAIResponsesOptions>(&mut params, model, options, Endpoint::Azure);
    Value::Object(params)
}

impl responses::OwnOptions for AzureOpenAIResponsesOptions {
    fn reasoning(&self) -> responses::Reasoning<'_> {
        (&self.reasoning_effort, &self.reasoning_summary, &self.tool_choice)
    }
}

impl StreamFn for AzureOpenAIResponses {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        driver::stream(Wire(self.clone()), model, context, options)
    }
}

/// The wire API behind [`AzureOpenAIResponses`] (crate-private: its decoding types stay private).
struct Wire(AzureOpenAIResponses);

impl WireApi for Wire {
    type Dialect = ResponsesDialect;
    type Decoder = ResponsesDecode;
    const CANCEL: Cancel = RESPONSES_CANCEL;

    const API_ID: Option<&'static str> = Some(API);

    async fn prepare(&self, call: Call<'_>) -> Result<Exchange<Self>, Stop> {
        let Call { model, context, options, .. } = call;
        let deployment = self.0.resolve_deployment_name(model, options);
        let Some(key) = options.api_key.clone().filter(|k| !k.is_empty()) else {
            return Err(Stop::error(format!("No API key for provider: {}", model.provider)));
        };
        let url = self.0.request_url(model, options).map_err(Stop::error)?;
        let compat = compat(model);
        let context = resolve_transcript(context, compat.supports_mid_convo_system_messages);
        let grammar_inputs = grammar_inputs(&context, &compat)?;
        let params = build_params(model, &context, options, &compat, &deployment);
        let params = adapter_support::apply_on_payload(options, model, params).await;
        let request = openai::json_request(model, options, url, ("api-key", key), Vec::new(), &params);
        let flavor = Flavor {
            prefix: ERROR_PREFIX.to_owned(),
            hints: false,
            no_stop_reason: "Azure OpenAI Responses stream ended without a stop reason",
            tier_pricing: TierPricing::Unpriced,
            grammar_inputs,
        };
        Ok(responses::exchange(request, flavor, options))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn model(base_url: &str) -> Model {
        let mut model = Model::new("gpt-5-mini").with_api(API).with_provider("azure");
        model.base_url = base_url.to_owned();
        model
    }

    fn env(pairs: &[(&str, &str)]) -> StreamOptions {
        StreamOptions {
            env: Some(Arc::new(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())),
            ..Default::default()
        }
    }

    #[test]
    fn resource_name_builds_the_azure_url() {
        let adapter = AzureOpenAIResponses::default();
        let options = env(&[("AZURE_OPENAI_RESOURCE_NAME", "my-res")]);
        assert_eq!(
            adapter.request_url(&model(""), &options).unwrap(),
            "https://my-res.openai.azure.com/openai/v1/responses?api-version=v1"
        );
        let adapter = adapter.with_resource_name("other").with_api_version("2025-04-01-preview");
        assert_eq!(
            adapter.request_url(&model(""), &options).unwrap(),
            "https://other.openai.azure.com/openai/v1/responses?api-version=2025-04-01-preview"
        );
    }

    #[test]
    fn base_url_wins_over_resource_name_and_azure_paths_are_normalized() {
        let options = env(&[
            ("AZURE_OPENAI_BASE_URL", " https://x.cognitiveservices.azure.com/openai/ "),
            ("AZURE_OPENAI_RESOURCE_NAME", "ignored"),
            ("AZURE_OPENAI_API_VERSION", "preview"),
        ]);
        let adapter = AzureOpenAIResponses::default();
        assert_eq!(
            adapter.request_url(&model(""), &options).unwrap(),
            "https://x.cognitiveservices.azure.com/openai/v1/responses?api-version=preview"
        );
        for (raw, expected) in [
            ("https://r.openai.azure.com", "https://r.openai.azure.com/openai/v1"),
            ("https://r.openai.azure.com/openai/v1/responses?x=1", "https://r.openai.azure.com/openai/v1"),
            ("https://r.services.ai.azure.com/models", "https://r.services.ai.azure.com/models"),
            ("https://proxy.example.com/", "https://proxy.example.com"),
            ("http://127.0.0.1:8080/openai", "http://127.0.0.1:8080/openai"),
        ] {
            assert_eq!(normalize_base_url(raw).unwrap(), expected, "{raw}");
        }
        assert_eq!(normalize_base_url("not a url").unwrap_err(), "Invalid Azure OpenAI base URL: not a url");
        // A query on the base URL is kept; `api-version` replaces one of the same name.
        assert_eq!(
            responses_url("https://p.example.com/v1?a=1&api-version=old", "v1"),
            "https://p.example.com/v1/responses?a=1&api-version=v1"
        );
    }

    #[test]
    fn the_model_base_url_is_the_last_resort_and_none_is_an_error() {
        let adapter = AzureOpenAIResponses::default();
        let options = StreamOptions::default();
        if std::env::var_os("AZURE_OPENAI_BASE_URL").is_none()
            && std::env::var_os("AZURE_OPENAI_RESOURCE_NAME").is_none()
        {
            assert_eq!(
                adapter.request_url(&model("http://127.0.0.1:9/v1"), &options).unwrap(),
                "http://127.0.0.1:9/v1/responses?api-version=v1"
            );
            assert!(adapter
                .request_url(&model(""), &options)
                .unwrap_err()
                .starts_with("Azure OpenAI base URL is required"));
        }
    }

    #[test]
    fn deployment_names_come_from_the_adapter_then_the_map() {
        let options = env(&[("AZURE_OPENAI_DEPLOYMENT_NAME_MAP", " a=b , gpt-5-mini = prod-mini ,bad, =x,y=")]);
        let adapter = AzureOpenAIResponses::default();
        assert_eq!(adapter.resolve_deployment_name(&model(""), &options), "prod-mini");
        assert_eq!(
            adapter.resolve_deployment_name(&Model::new("other").with_api(API).with_provider("azure"), &options),
            "other"
        );
        let adapter = adapter.with_deployment_name("pinned");
        assert_eq!(adapter.resolve_deployment_name(&model(""), &options), "pinned");
    }
}
