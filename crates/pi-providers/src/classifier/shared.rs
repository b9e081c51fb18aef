//! What the classifier APIs share (the reference's `classifier-shared.js`): one JSON POST with
//! bearer auth, `on_payload` / `on_response`, a time limit per attempt and the provider retry
//! policy (two retries unless the options say otherwise); the token usage of a
//! `{input_tokens, output_tokens}` object priced from the catalog; number checks.

use pi_types::{Model, StreamOptions, Usage};
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::api::support::{apply_on_payload, identity_headers, merge_headers, model_headers, option_headers};
use crate::transport::http::{self, ApiError, ApiErrorKind, Body, Dialect, Read, Retry};

/// Largest classifier answer read (answers are a few kilobytes; llama.cpp's deepest readout a
/// few megabytes).
const MAX_BODY_BYTES: usize = 32 << 20;
/// Retries of a classifier request when the options set none (the reference's default).
const DEFAULT_MAX_RETRIES: u32 = 2;

/// How one classifier API words its HTTP failures.
pub(super) struct Wording {
    /// `<label> returned <status>`, `<label> error (<status>): ...`.
    pub label: &'static str,
    /// Statuses that fail at once although they are normally retried.
    pub no_retry: &'static [u16],
    /// The message for a status, replacing the body (OpenAI Decisions' gateway timeout).
    pub status_note: Option<fn(u16) -> Option<String>>,
    /// Whether a request without an API key fails before it is sent.
    pub key_required: bool,
}

struct ClassifierDialect<'a> {
    wording: &'a Wording,
    timeout_ms: Option<u64>,
}

impl Dialect for ClassifierDialect<'_> {
    fn status_error(&self, status: u16, headers: &HeaderMap, body: &[u8]) -> ApiError {
        ApiError {
            kind: ApiErrorKind::Status,
            status: Some(status),
            headers: Some(headers.clone()),
            message: format!("{} returned {status}", self.wording.label),
            body: http::normalize_body(&String::from_utf8_lossy(body)),
        }
    }

    fn format(&self, error: &ApiError) -> String {
        if let (Some(status), Some(note)) = (error.status, self.wording.status_note) {
            if let Some(text) = note(status) {
                return text;
            }
        }
        if error.kind == ApiErrorKind::Timeout {
            if let Some(ms) = self.timeout_ms {
                return format!("Request timed out after {ms}ms");
            }
        }
        http::format_provider_error(error, Some(&format!("{} error", self.wording.label)))
    }

    fn retry(&self, error: &ApiError, _retry_index: u32, _max_delay: Option<u64>) -> Option<Retry> {
        error.status.filter(|status| self.wording.no_retry.contains(status)).map(|_| Ok(None))
    }
}

/// One JSON POST; the parsed answer body, or the result's `errorMessage`. `observe`: the
/// request goes through `on_payload` and `on_response` (llama.cpp observes only its completion).
pub(super) async fn post_json(
    wording: &Wording,
    url: &str,
    model: &Model,
    body: Value,
    options: &StreamOptions,
    observe: bool,
) -> Result<Value, String> {
    if wording.key_required && options.api_key.as_ref().is_none_or(|key| key.is_empty()) {
        return Err(format!("No API key for provider: {}", model.provider));
    }
    let payload = if observe { apply_on_payload(options, model, body).await } else { body };
    let auth = options.api_key.as_ref().filter(|key| !key.is_empty()).map(|key| format!("Bearer {key}"));
    let defaults =
        vec![("authorization".to_owned(), auth), ("content-type".to_owned(), Some("application/json".to_owned()))];
    let headers =
        merge_headers(&[identity_headers(model, options), defaults, model_headers(model), option_headers(options)]);
    let request =
        http::Request { url: url.to_owned(), headers, body: crate::js_json::stringify(&payload).into_bytes() };
    let mut attempt_options = options.clone();
    attempt_options.max_retries = Some(options.max_retries.unwrap_or(DEFAULT_MAX_RETRIES));
    if !observe {
        attempt_options.on_response = None;
    }
    let dialect = ClassifierDialect { wording, timeout_ms: options.timeout_ms };
    let response = http::send(&request, model, &attempt_options, &dialect).await.map_err(|failure| failure.message)?;
    read_json(response, options, MAX_BODY_BYTES).await
}

/// A whole JSON body (under the idle limit and `max` bytes), parsed as `JSON.parse` would.
pub(crate) async fn read_json(
    response: reqwest::Response,
    options: &StreamOptions,
    max: usize,
) -> Result<Value, String> {
    let mut body = Body::new(response, options);
    let mut bytes = Vec::new();
    loop {
        match body.next_raw().await {
            Read::Chunk(chunk) => {
                if bytes.len().saturating_add(chunk.len()) > max {
                    return Err(format!("Response body exceeds {max} bytes"));
                }
                bytes.extend_from_slice(&chunk);
            }
            Read::End => break,
            Read::Aborted => return Err("Request was aborted.".to_owned()),
            Read::Failed(message) => return Err(message),
        }
    }
    crate::js_json::parse(&String::from_utf8_lossy(&bytes))
}

/// A finite number, else `<label> returned an invalid <field>`.
pub(super) fn required_number(label: &str, value: Option<&Value>, field: &str) -> Result<f64, String> {
    value
        .and_then(Value::as_f64)
        .filter(|n| n.is_finite())
        .ok_or_else(|| format!("{label} returned an invalid {field}"))
}

/// A positive finite token count, else 0.
fn token_count(value: Option<&Value>) -> f64 {
    value.and_then(Value::as_f64).filter(|n| n.is_finite() && *n > 0.0).unwrap_or(0.0)
}

/// Token counts are whole numbers; a fractional count from a service is cut to its integer.
pub(super) fn tokens(count: f64) -> u64 {
    count as u64
}

/// Usage from `{input_tokens, output_tokens, input_tokens_details?}`, priced from the catalog;
/// `None` when the object is missing or has neither count. Cached and cache-write tokens are
/// part of `input_tokens` (as in the Responses API) and split out of `input`.
pub(super) fn parse_usage(value: Option<&Value>, model: &Model) -> Option<Usage> {
    let value = value.filter(|v| v.is_object())?;
    if value.get("input_tokens").is_none() && value.get("output_tokens").is_none() {
        return None;
    }
    let total_input = token_count(value.get("input_tokens"));
    let output = token_count(value.get("output_tokens"));
    let details = value.get("input_tokens_details").filter(|d| d.is_object());
    let cache_read = token_count(details.and_then(|d| d.get("cached_tokens"))).min(total_input);
    let cache_write = token_count(details.and_then(|d| d.get("cache_write_tokens"))).min(total_input - cache_read);
    let mut usage = Usage {
        input: tokens(total_input - cache_read - cache_write),
        output: tokens(output),
        cache_read: tokens(cache_read),
        cache_write: tokens(cache_write),
        total_tokens: tokens(total_input + output),
        ..Default::default()
    };
    crate::cost::calculate_cost(model, &mut usage);
    Some(usage)
}

/// `new URL(path, base + "/")` for a base without trailing slashes.
pub(super) fn join(base_url: &str, path: &str) -> String {
    format!("{}/{path}", base_url.trim_end_matches('/'))
}

/// JavaScript's `String(value)` for a JSON value (`undefined` for a missing one).
pub(super) fn js_string(value: Option<&Value>) -> String {
    match value {
        None => "undefined".to_owned(),
        Some(Value::Null) => "null".to_owned(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Object(_)) => "[object Object]".to_owned(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| if item.is_null() { String::new() } else { js_string(Some(item)) })
            .collect::<Vec<_>>()
            .join(","),
        Some(other) => crate::js_json::stringify(other),
    }
}
