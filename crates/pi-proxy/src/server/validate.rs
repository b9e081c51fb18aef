//! Checking a request body: JSON shape, the model against the server's registry, and the
//! client's headers and sampling parameters against the allow-lists.

use axum::http::StatusCode;
use pi_types::{Model, StreamOptions, TranscriptContext};
use subtle::ConstantTimeEq;

use super::{ServerConfig, FORBIDDEN_HEADERS};
use crate::wire::{ProxyContext, ProxyRequest};
use pi_providers::api::pi_messages::PiMessagesOptions;

/// Why a request is refused: the status and the `error` text.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub status: StatusCode,
    pub message: String,
    /// Seconds for `retry-after` (429; a 503 always gets [`super::Limits::retry_after_secs`]).
    pub retry_after: Option<u64>,
}

/// Longest refusal text, in characters: messages quote the client's input (a model id, a
/// header name, a parser's view of a value), which is not echoed back at any length.
const MAX_MESSAGE_CHARS: usize = 1000;

impl Refusal {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        let mut message = message.into();
        if let Some((cut, _)) = message.char_indices().nth(MAX_MESSAGE_CHARS) {
            message.truncate(cut);
            message.push_str("... [truncated]");
        }
        Self { status, message, retry_after: None }
    }

    fn bad(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
}

/// A request ready to go upstream.
#[derive(Debug)]
pub(crate) struct Checked {
    /// The server's own model (base URL, headers and compat from the server's registry).
    pub model: Model,
    pub context: TranscriptContext,
    pub options: StreamOptions,
}

/// Parse and check a body of `POST /api/stream`.
pub(crate) fn check(config: &ServerConfig, body: &[u8]) -> Result<Checked, Refusal> {
    let request: ProxyRequest = parse(body)?;
    let model = resolve_model(config, &request.model)?;
    check_options(config, &request)?;
    let context = TranscriptContext::from_messages(request.context.messages);
    let options = clamp_max_tokens(&model, request.options.to_stream_options());
    Ok(Checked { model, context, options })
}

/// The body of `POST /messages` (pi-ai's `pi-messages` API): the model by id only.
#[derive(serde::Deserialize)]
struct PiMessagesRequest {
    model: String,
    context: ProxyContext,
    #[serde(default)]
    options: PiMessagesOptions,
}

/// Parse and check a body of `POST /messages`. The options carry no headers or sampling
/// parameters, so there is nothing to allow-list.
pub(crate) fn check_pi_messages(config: &ServerConfig, body: &[u8]) -> Result<Checked, Refusal> {
    let request: PiMessagesRequest = parse(body)?;
    let model = resolve_model_id(config, &request.model)?;
    let context = TranscriptContext::from_messages(request.context.messages);
    let options = clamp_max_tokens(&model, request.options.to_stream_options());
    Ok(Checked { model, context, options })
}

/// `maxTokens` no larger than the model's own limit (a model without one is left alone).
fn clamp_max_tokens(model: &Model, mut options: StreamOptions) -> StreamOptions {
    if model.max_tokens > 0 {
        options.max_tokens = options.max_tokens.map(|requested| requested.min(model.max_tokens));
    }
    options
}

/// The served model with this id: the one provider serving it, or `provider/id` when the id
/// alone is not served (or is served by several providers).
fn resolve_model_id(config: &ServerConfig, id: &str) -> Result<Model, Refusal> {
    let providers = config.models.providers();
    let mut serving = providers.iter().filter(|p| p.models().iter().any(|m| m.id == id));
    match (serving.next(), serving.next()) {
        (Some(provider), None) => {
            if let Some(model) = provider.models().iter().find(|m| m.id == id) {
                return Ok(model.clone());
            }
        }
        (Some(first), Some(second)) => {
            if let Some(model) = id.split_once('/').and_then(|(p, rest)| config.models.get_model(p, rest)) {
                return Ok(model);
            }
            return Err(Refusal::bad(format!(
                "Model id {id} is served by several providers ({}, {}, ...); name one as provider/id",
                first.id(),
                second.id()
            )));
        }
        (None, _) => {}
    }
    id.split_once('/')
        .and_then(|(provider, rest)| config.models.get_model(provider, rest))
        .ok_or_else(|| Refusal::bad(format!("Model not served: {id}")))
}

/// Parse a JSON body; a refusal names the offending field.
fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Refusal> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let parsed: Result<T, _> = serde_path_to_error::deserialize(&mut deserializer);
    let request = parsed.map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        match inner.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                Refusal::bad(format!("Malformed JSON body: {inner}"))
            }
            _ if path == "." || path.is_empty() => Refusal::bad(format!("Invalid request body: {inner}")),
            _ => Refusal::bad(format!("Invalid field `{path}`: {inner}")),
        }
    })?;
    deserializer.end().map_err(|error| Refusal::bad(format!("Malformed JSON body: {error}")))?;
    Ok(request)
}

fn same(left: &str, right: &str) -> bool {
    bool::from(left.as_bytes().ct_eq(right.as_bytes()))
}

/// The server's copy of the requested model; the client's may not point elsewhere.
fn resolve_model(config: &ServerConfig, requested: &Model) -> Result<Model, Refusal> {
    let Some(served) = config.models.get_model(&requested.provider, &requested.id) else {
        return Err(Refusal::bad(format!("Model not served: {}/{}", requested.provider, requested.id)));
    };
    if requested.api != served.api {
        return Err(Refusal::bad(format!("Field `model.api` does not match the server's model: {}", requested.api)));
    }
    // The form `GET /api/models` lists (credentials hidden) stands for the served URL.
    if requested.base_url != served.base_url && requested.base_url != super::models::public_base_url(&served.base_url) {
        return Err(Refusal::bad("Field `model.baseUrl` does not match the server's model"));
    }
    for (name, value) in requested.headers.iter().flatten() {
        let matches = served
            .headers
            .iter()
            .flatten()
            .find(|(served_name, _)| served_name.eq_ignore_ascii_case(name))
            .is_some_and(|(_, served_value)| same(served_value, value));
        if !matches {
            return Err(Refusal::bad(format!("Field `model.headers.{name}` does not match the server's model")));
        }
    }
    Ok(served)
}

fn check_options(config: &ServerConfig, request: &ProxyRequest) -> Result<(), Refusal> {
    for name in request.options.headers.iter().flat_map(|headers| headers.keys()) {
        let lower = name.to_ascii_lowercase();
        let allowed = !FORBIDDEN_HEADERS.contains(&lower.as_str()) && config.allowed_headers.contains(&lower);
        if !allowed {
            return Err(Refusal::bad(format!("Header not allowed: `options.headers.{name}`")));
        }
    }
    for key in request.options.sampling_params.iter().flat_map(|params| params.keys()) {
        if !config.allowed_sampling_params.contains(key) {
            return Err(Refusal::bad(format!("Sampling parameter not allowed: `options.samplingParams.{key}`")));
        }
    }
    Ok(())
}
