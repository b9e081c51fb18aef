//! Options of one provider request.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::model::{Model, ThinkingLevel};

/// Token budgets per thinking level (token-budget providers only).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingBudgets {
    /// Minimal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimal: Option<u64>,
    /// Low.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low: Option<u64>,
    /// Medium.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub medium: Option<u64>,
    /// High.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<u64>,
}

/// Preferred transport where a provider offers several.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// Server-sent events.
    #[default]
    Sse,
    /// WebSocket.
    Websocket,
    /// WebSocket with cached continuation.
    WebsocketCached,
    /// Provider's choice.
    Auto,
}

/// Prompt-cache retention preference.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheRetention {
    /// No caching.
    None,
    /// Provider's short retention (default).
    #[default]
    Short,
    /// Provider's long retention.
    Long,
}

/// Provider-neutral tool selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool calls.
    None,
}

/// How the `User-Agent` header reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UserAgentMode {
    /// `pi`.
    Short,
    /// `pi/<version> (<os>; <runtime>; <arch>)` (the default).
    Detailed,
    /// A value of the caller's own.
    #[serde(untagged)]
    Custom {
        /// The header value.
        custom: String,
    },
}

/// The application a request is attributed to (OpenRouter, NVIDIA NIM and OpenCode headers).
///
/// The texts are `Cow`s so that pi's own attribution, which every agent request carries by
/// default, is built and copied without allocating: `"name".into()` and `String`s work alike.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientAttribution {
    /// Application name.
    pub name: Cow<'static, str>,
    /// Application URL.
    pub url: Cow<'static, str>,
    /// Application categories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub categories: Option<Cow<'static, [Cow<'static, str>]>>,
}

impl ClientAttribution {
    /// pi's own attribution, which agent loops send by default.
    pub fn pi() -> Self {
        const CATEGORIES: &[Cow<'static, str>] = &[Cow::Borrowed("cli-agent")];
        Self {
            name: Cow::Borrowed("pi"),
            url: Cow::Borrowed("https://pi.dev"),
            categories: Some(Cow::Borrowed(CATEGORIES)),
        }
    }
}

/// Who is calling: `User-Agent` and attribution headers. Absent fields use the defaults: a
/// detailed `User-Agent` and no attribution.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientIdentity {
    /// How the `User-Agent` reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<UserAgentMode>,
    /// Attribution; `Some(None)` (JSON `null`) turns a default attribution off.
    #[serde(default, deserialize_with = "deserialize_attribution", skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Option<ClientAttribution>>,
    /// Client version in the detailed `User-Agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

fn deserialize_attribution<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<ClientAttribution>>, D::Error> {
    Option::<ClientAttribution>::deserialize(deserializer).map(Some)
}

impl ClientIdentity {
    /// The identity agent loops use unless told otherwise: pi's attribution.
    pub fn agent_default() -> Self {
        Self { attribution: Some(Some(ClientAttribution::pi())), ..Default::default() }
    }

    /// Merge field by field: fields set in `other` win.
    pub fn merged_with(&self, other: Option<&ClientIdentity>) -> ClientIdentity {
        let Some(other) = other else { return self.clone() };
        ClientIdentity {
            user_agent: other.user_agent.clone().or_else(|| self.user_agent.clone()),
            attribution: other.attribution.clone().or_else(|| self.attribution.clone()),
            version: other.version.clone().or_else(|| self.version.clone()),
        }
    }
}

/// Status and headers of an HTTP response, for [`StreamOptions::on_response`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProviderResponse {
    /// HTTP status.
    pub status: u16,
    /// Response headers (lower-case names).
    pub headers: IndexMap<String, String>,
}

/// Inspect or replace the request payload before it is sent (`None` keeps it).
pub type OnPayload = Arc<dyn Fn(&Value, &Model) -> BoxFuture<'static, Option<Value>> + Send + Sync>;
/// Called with the HTTP status and headers before the body is read.
pub type OnResponse = Arc<dyn Fn(&ProviderResponse, &Model) -> BoxFuture<'static, ()> + Send + Sync>;
/// Observes each raw provider stream event before normalization.
pub type OnProviderStreamEvent = Arc<dyn Fn(&Value, &Model) -> BoxFuture<'static, ()> + Send + Sync>;

/// Options of one request (the reference's `SimpleStreamOptions`).
#[derive(Clone, Default)]
pub struct StreamOptions {
    /// Cancels the request; the stream then ends with `aborted`.
    pub cancel: Option<CancellationToken>,
    /// API key; never printed by `Debug`.
    pub api_key: Option<String>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Output token limit.
    pub max_tokens: Option<u64>,
    /// Extra sampling parameters merged into OpenAI-compatible request bodies.
    pub sampling_params: Option<Map<String, Value>>,
    /// Requested reasoning level (`None` = off).
    pub reasoning: Option<ThinkingLevel>,
    /// Token budgets per level.
    pub thinking_budgets: Option<ThinkingBudgets>,
    /// Tool selection.
    pub tool_choice: Option<ToolChoice>,
    /// Session id for prompt caching and routing.
    pub session_id: Option<String>,
    /// Extra headers; `None` removes a default header.
    pub headers: IndexMap<String, Option<String>>,
    /// Caller identity.
    pub identity: Option<ClientIdentity>,
    /// Time to response headers, in ms.
    pub timeout_ms: Option<u64>,
    /// Longest silence between stream chunks before the stream is ended, in ms.
    pub idle_timeout_ms: Option<u64>,
    /// Retries before the first byte.
    pub max_retries: Option<u32>,
    /// Cap on a server-requested retry delay (default 60 000; 0 disables the cap).
    pub max_retry_delay_ms: Option<u64>,
    /// Transport preference.
    pub transport: Option<Transport>,
    /// Cache retention preference.
    pub cache_retention: Option<CacheRetention>,
    /// Request metadata (e.g. Anthropic `user_id`).
    pub metadata: Option<Map<String, Value>>,
    /// Payload hook.
    pub on_payload: Option<OnPayload>,
    /// Response hook.
    pub on_response: Option<OnResponse>,
    /// Raw provider event hook.
    pub on_provider_stream_event: Option<OnProviderStreamEvent>,
}

impl fmt::Debug for StreamOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamOptions")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("reasoning", &self.reasoning)
            .field("session_id", &self.session_id)
            .field("timeout_ms", &self.timeout_ms)
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}
