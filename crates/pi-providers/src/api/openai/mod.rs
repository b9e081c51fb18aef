//! OpenAI's wire APIs and the endpoints that speak them: Chat Completions, Responses, Azure
//! OpenAI (Responses, and its chat-completions models) and the ChatGPT Codex backend.

pub mod azure;
pub mod codex;
pub mod completions;
pub(crate) mod grammar;
pub mod responses;

use pi_types::{Model, StreamOptions, TranscriptContext};
use serde_json::Value;

use crate::api::support as adapter_support;
use crate::js_json;
use crate::transport::http;

/// A header source: a name and its value, `None` to remove the header.
pub(crate) type Headers = Vec<(String, Option<String>)>;

/// A streaming JSON request to an OpenAI endpoint: `params` posted to `url`. Headers, the later
/// winning: the identity headers; JSON `Accept` and `Content-Type`, and `credential`; the
/// model's; `extra` (what the API adds: GitHub Copilot's, session affinity); the caller's.
pub(crate) fn json_request(
    model: &Model,
    options: &StreamOptions,
    url: String,
    credential: (&str, String),
    extra: Vec<Headers>,
    params: &Value,
) -> http::Request {
    let base = vec![
        ("Accept".to_owned(), Some("application/json".to_owned())),
        ("Content-Type".to_owned(), Some("application/json".to_owned())),
        (credential.0.to_owned(), Some(credential.1)),
    ];
    let mut sources =
        vec![adapter_support::identity_headers(model, options), base, adapter_support::model_headers(model)];
    sources.extend(extra);
    sources.push(adapter_support::option_headers(options));
    let headers = adapter_support::merge_headers(&sources);
    http::Request { url, headers, body: js_json::stringify(params).into_bytes() }
}

/// A request to `{base_url}/{path}` of an OpenAI-style endpoint with a bearer `key`: a
/// [`json_request`] whose extra headers are GitHub Copilot's (read from `context`), then
/// `session`'s.
#[allow(clippy::too_many_arguments)] // each caller names what differs
pub(crate) fn bearer_request(
    model: &Model,
    options: &StreamOptions,
    context: &TranscriptContext,
    key: &str,
    path: &str,
    session: Headers,
    params: &Value,
) -> http::Request {
    let url = format!("{}/{path}", model.base_url.trim_end_matches('/'));
    let extra = vec![adapter_support::copilot_headers(model, context.messages()), session];
    json_request(model, options, url, ("Authorization", format!("Bearer {key}")), extra, params)
}

/// The session-affinity headers for `session` (none without one) in a
/// `compat.sessionAffinityFormat`: OpenRouter's `x-session-id`; otherwise `x-client-request-id`,
/// after `openai_name` (the API's spelling of OpenAI's session header) in the `openai` format,
/// and before `x-session-affinity` when `affinity` asks for it.
pub(crate) fn session_headers(session: Option<String>, format: &str, openai_name: &str, affinity: bool) -> Headers {
    let Some(session) = session else { return Vec::new() };
    if format == "openrouter" {
        return vec![("x-session-id".to_owned(), Some(session))];
    }
    let mut headers = Vec::new();
    if format == "openai" {
        headers.push((openai_name.to_owned(), Some(session.clone())));
    }
    headers.push(("x-client-request-id".to_owned(), Some(session.clone())));
    if affinity {
        headers.push(("x-session-affinity".to_owned(), Some(session)));
    }
    headers
}
