//! The proxy protocol (pi-agent-core 1.6.0 `dist/proxy.js`).
//!
//! The client POSTs a [`ProxyRequest`] (`{model, context, options}`) as JSON to
//! `{proxy_url}/api/stream` with `Authorization: Bearer <token>`. A 2xx answer is a stream of
//! lines `data: <event JSON>`, each followed by a blank line. An event is an
//! `AssistantMessageEvent` without its `partial` message: the client rebuilds the message from
//! the events, so the bytes on the wire stay linear in the response. Any other status carries
//! `{"error": "<text>"}`.
//!
//! The events are pi-ai's `pi-messages` events with fewer members: both protocols use
//! [`WireEvent`] with [`Protocol::Proxy`] or [`Protocol::PiMessages`], whose docs list where
//! the two differ.
//!
//! [`WireEvent`]: pi_providers::api::pi_messages::WireEvent
//! [`Protocol::Proxy`]: pi_providers::api::pi_messages::Protocol::Proxy
//! [`Protocol::PiMessages`]: pi_providers::api::pi_messages::Protocol::PiMessages

use std::sync::Arc;

use indexmap::IndexMap;
use pi_types::{
    CacheRetention, Message, Model, RequestHeaders, StreamOptions, ThinkingBudgets, ThinkingLevel, Transport,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The request body: the model, the transcript and the serializable options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProxyRequest {
    /// The model as the client knows it (the server serves its own copy).
    pub model: Model,
    /// The normalized transcript (`TranscriptContext`: `{messages}`).
    pub context: ProxyContext,
    /// The options the reference forwards.
    #[serde(default)]
    pub options: ProxyRequestOptions,
}

/// The transcript on the wire.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProxyContext {
    /// The messages, prompt and tool declarations in system messages.
    pub messages: Vec<Message>,
}

/// The reference's `ProxySerializableStreamOptions`: what a request may ask of the server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxyRequestOptions {
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Extra sampling parameters for OpenAI-compatible APIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_params: Option<Map<String, Value>>,
    /// Output token limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Requested reasoning level (absent = off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ThinkingLevel>,
    /// Prompt-cache retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_retention: Option<CacheRetention>,
    /// Session id for caching and routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Do not use or record server-side continuation state (Anthropic message threads): a
    /// cache-warming replay must not take the session's thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_continuation: Option<bool>,
    /// Extra request headers; `null` removes a default header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<IndexMap<String, Option<String>>>,
    /// Request metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Transport preference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<Transport>,
    /// Token budgets per thinking level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budgets: Option<ThinkingBudgets>,
    /// Cap on a server-requested retry delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retry_delay_ms: Option<u64>,
}

impl ProxyRequestOptions {
    /// The subset of `options` the reference's `buildProxyRequestOptions` forwards (the API
    /// key, hooks, timeouts, retries and identity stay with the caller).
    pub fn from_stream_options(options: &StreamOptions) -> Self {
        Self {
            temperature: options.temperature,
            sampling_params: options.sampling_params.as_deref().cloned(),
            max_tokens: options.max_tokens,
            reasoning: options.reasoning.filter(|level| *level != ThinkingLevel::Off),
            cache_retention: options.cache_retention,
            session_id: options.session_id.clone(),
            disable_continuation: options.disable_continuation.then_some(true),
            headers: (!options.headers.is_empty()).then(|| options.headers.to_map()),
            metadata: options.metadata.as_deref().cloned(),
            transport: options.transport,
            thinking_budgets: options.thinking_budgets.as_deref().cloned(),
            max_retry_delay_ms: options.max_retry_delay_ms,
        }
    }

    /// Stream options carrying these fields (everything else default).
    pub fn to_stream_options(&self) -> StreamOptions {
        StreamOptions {
            temperature: self.temperature,
            sampling_params: self.sampling_params.clone().map(Arc::new),
            max_tokens: self.max_tokens,
            reasoning: self.reasoning,
            cache_retention: self.cache_retention,
            session_id: self.session_id.clone(),
            headers: self.headers.clone().map(RequestHeaders::from).unwrap_or_default(),
            metadata: self.metadata.clone().map(Arc::new),
            transport: self.transport,
            thinking_budgets: self.thinking_budgets.clone().map(Arc::new),
            max_retry_delay_ms: self.max_retry_delay_ms,
            disable_continuation: self.disable_continuation.unwrap_or(false),
            ..StreamOptions::default()
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_subset() {
        let options = StreamOptions {
            api_key: Some("sk-never-sent".into()),
            temperature: Some(0.5),
            reasoning: Some(ThinkingLevel::Off),
            timeout_ms: Some(5),
            ..Default::default()
        };
        let wire = serde_json::to_value(ProxyRequestOptions::from_stream_options(&options)).unwrap();
        assert_eq!(wire, json!({"temperature": 0.5}));
    }

    /// A cache-warming replay through the proxy keeps its `disableContinuation`, as the
    /// reference's client sends it, so the server's adapter leaves the session's thread alone.
    #[test]
    fn disable_continuation_travels_both_ways() {
        let options = StreamOptions { disable_continuation: true, ..Default::default() };
        let wire = ProxyRequestOptions::from_stream_options(&options);
        assert_eq!(serde_json::to_value(&wire).unwrap(), json!({"disableContinuation": true}));
        assert!(wire.to_stream_options().disable_continuation);
        let plain = ProxyRequestOptions::from_stream_options(&StreamOptions::default());
        assert!(!plain.to_stream_options().disable_continuation);
    }
}

/// The answer of `GET {proxy_url}/api/models` (this server's addition to the protocol): every
/// model the server serves, as `Model` JSON without `headers`, `compat` and unknown fields,
/// with credentials hidden from its `baseUrl` (`user:pass@`, the query) and redacted elsewhere.
/// A client sends one of them back as the request's `model`: its `baseUrl` and `api` are the
/// server's, so the request passes the server's check.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelList {
    /// The served models, provider by provider.
    pub models: Vec<Model>,
}
