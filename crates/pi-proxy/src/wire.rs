//! The proxy protocol (pi-agent-core 1.6.0 `dist/proxy.js`).
//!
//! The client POSTs a [`ProxyRequest`] (`{model, context, options}`) as JSON to
//! `{proxy_url}/api/stream` with `Authorization: Bearer <token>`. A 2xx answer is a stream of
//! lines `data: <ProxyEvent JSON>`, each followed by a blank line. A [`ProxyEvent`] is an
//! [`AssistantMessageEvent`] without its `partial` message: the client rebuilds the message from
//! the events, so the bytes on the wire stay linear in the response. Any other status carries
//! `{"error": "<text>"}`.

use std::sync::Arc;

use indexmap::IndexMap;
use pi_types::{
    AssistantContent, AssistantMessageEvent, CacheRetention, CompactString, Message, Model, RequestHeaders, StopReason,
    StreamOptions, ThinkingBudgets, ThinkingLevel, ToolCall, Transport, Usage,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One event of the stream, as the server sends it (partials stripped).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum ProxyEvent {
    /// The response started.
    Start,
    /// A text block started at `content_index`.
    TextStart {
        /// Index of the block.
        content_index: usize,
    },
    /// Text was appended.
    TextDelta {
        /// Index of the block.
        content_index: usize,
        /// The new text.
        delta: CompactString,
    },
    /// A text block ended.
    TextEnd {
        /// Index of the block.
        content_index: usize,
        /// The block's `textSignature`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content_signature: Option<String>,
    },
    /// A thinking block started.
    ThinkingStart {
        /// Index of the block.
        content_index: usize,
    },
    /// Reasoning was appended.
    ThinkingDelta {
        /// Index of the block.
        content_index: usize,
        /// The new text.
        delta: CompactString,
    },
    /// A thinking block ended.
    ThinkingEnd {
        /// Index of the block.
        content_index: usize,
        /// The block's `thinkingSignature`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content_signature: Option<String>,
    },
    /// A tool call started.
    ToolcallStart {
        /// Index of the block.
        content_index: usize,
        /// Call id.
        id: CompactString,
        /// Tool name.
        tool_name: CompactString,
    },
    /// Argument text was appended.
    ToolcallDelta {
        /// Index of the block.
        content_index: usize,
        /// The new argument text.
        delta: CompactString,
    },
    /// A tool call ended; `tool_call` is the finished block.
    ToolcallEnd {
        /// Index of the block.
        content_index: usize,
        /// The finished call (a `toolCall` content block on the wire).
        #[serde(with = "tagged_tool_call")]
        tool_call: ToolCall,
    },
    /// The response finished.
    Done {
        /// `stop`, `length` or `toolUse`.
        reason: StopReason,
        /// Final usage.
        usage: Usage,
        /// Provider-native effort level used.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_thinking_level: Option<Box<str>>,
    },
    /// The response failed.
    Error {
        /// `error` or `aborted`.
        reason: StopReason,
        /// What went wrong.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_message: Option<Box<str>>,
        /// Usage so far.
        usage: Usage,
        /// Provider-native effort level used.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_thinking_level: Option<Box<str>>,
    },
}

impl ProxyEvent {
    /// Strip an event for the wire. Block events read their ids, names and signatures from
    /// the event's partial message; nothing is copied per delta except the delta itself.
    pub fn from_event(event: &AssistantMessageEvent) -> Self {
        use AssistantMessageEvent as E;
        let block = |partial: &pi_types::AssistantMessage, index: usize| partial.content.get(index).cloned();
        match event {
            E::Start { .. } => Self::Start,
            E::TextStart { content_index, .. } => Self::TextStart { content_index: *content_index },
            E::TextDelta { content_index, delta, .. } => {
                Self::TextDelta { content_index: *content_index, delta: delta.clone() }
            }
            E::TextEnd { content_index, partial, .. } => Self::TextEnd {
                content_index: *content_index,
                content_signature: match partial.content.get(*content_index) {
                    Some(AssistantContent::Text(text)) => text.text_signature.clone(),
                    _ => None,
                },
            },
            E::ThinkingStart { content_index, .. } => Self::ThinkingStart { content_index: *content_index },
            E::ThinkingDelta { content_index, delta, .. } => {
                Self::ThinkingDelta { content_index: *content_index, delta: delta.clone() }
            }
            E::ThinkingEnd { content_index, partial, .. } => Self::ThinkingEnd {
                content_index: *content_index,
                content_signature: match partial.content.get(*content_index) {
                    Some(AssistantContent::Thinking(thinking)) => thinking.thinking_signature.clone(),
                    _ => None,
                },
            },
            E::ToolcallStart { content_index, partial, .. } => {
                let (id, tool_name) = match block(partial, *content_index) {
                    Some(AssistantContent::ToolCall(call)) => (call.id, call.name),
                    _ => Default::default(),
                };
                Self::ToolcallStart { content_index: *content_index, id, tool_name }
            }
            E::ToolcallDelta { content_index, delta, .. } => {
                Self::ToolcallDelta { content_index: *content_index, delta: delta.clone() }
            }
            E::ToolcallEnd { content_index, tool_call, .. } => {
                Self::ToolcallEnd { content_index: *content_index, tool_call: (**tool_call).clone() }
            }
            E::Done { reason, message } => Self::Done {
                reason: *reason,
                usage: message.usage.clone(),
                provider_thinking_level: message.provider_thinking_level.clone(),
            },
            E::Error { reason, error } => Self::Error {
                reason: *reason,
                error_message: error.error_message.clone(),
                usage: error.usage.clone(),
                provider_thinking_level: error.provider_thinking_level.clone(),
            },
        }
    }

    /// Whether this is `done` or `error`.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Done { .. } | Self::Error { .. })
    }
}

/// `toolcall_end.toolCall` is a content block on the wire, `type` included.
mod tagged_tool_call {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use pi_types::{AssistantContent, ToolCall};

    #[derive(Serialize)]
    #[serde(tag = "type", rename = "toolCall")]
    struct Tagged<'a> {
        #[serde(flatten)]
        call: &'a ToolCall,
    }

    pub(super) fn serialize<S: Serializer>(call: &ToolCall, serializer: S) -> Result<S::Ok, S::Error> {
        Tagged { call }.serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ToolCall, D::Error> {
        match AssistantContent::deserialize(deserializer)? {
            AssistantContent::ToolCall(call) => Ok(call),
            _ => Err(D::Error::custom("expected a toolCall block")),
        }
    }
}

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
    /// Do not use or record server-side continuation state (no adapter here keeps any).
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
            disable_continuation: None,
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
    fn events_have_the_reference_shape() {
        let call = ToolCall { id: "c1".into(), name: "f".into(), ..Default::default() };
        let cases = [
            (ProxyEvent::Start, json!({"type": "start"})),
            (
                ProxyEvent::TextEnd { content_index: 0, content_signature: None },
                json!({"type": "text_end", "contentIndex": 0}),
            ),
            (
                ProxyEvent::ToolcallStart { content_index: 1, id: "c1".into(), tool_name: "f".into() },
                json!({"type": "toolcall_start", "contentIndex": 1, "id": "c1", "toolName": "f"}),
            ),
            (
                ProxyEvent::ToolcallEnd { content_index: 1, tool_call: call },
                json!({"type": "toolcall_end", "contentIndex": 1,
                       "toolCall": {"type": "toolCall", "id": "c1", "name": "f", "arguments": {}}}),
            ),
            (
                ProxyEvent::Error {
                    reason: StopReason::Aborted,
                    error_message: Some("x".into()),
                    usage: Usage::default(),
                    provider_thinking_level: None,
                },
                json!({"type": "error", "reason": "aborted", "errorMessage": "x", "usage": {
                    "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                    "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}}}),
            ),
        ];
        for (event, expected) in cases {
            let value = serde_json::to_value(&event).unwrap();
            assert_eq!(value, expected);
            assert_eq!(serde_json::from_value::<ProxyEvent>(value).unwrap(), event);
        }
    }

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
}

/// The answer of `GET {proxy_url}/api/models` (this server's addition to the protocol): every
/// model the server serves, as `Model` JSON without `headers`, `compat` and unknown fields,
/// with credentials hidden from its `baseUrl` (`user:pass@`, the query) and redacted elsewhere. A client sends one of them back as the request's `model`: its `baseUrl`
/// and `api` are the server's, so the request passes the server's check.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelList {
    /// The served models, provider by provider.
    pub models: Vec<Model>,
}
