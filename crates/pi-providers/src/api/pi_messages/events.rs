//! The events of pi's two streaming protocols, one type for both.
//!
//! pi-agent-core's proxy (`POST /api/stream`, the reference's `streamProxy`) and pi-ai's
//! `pi-messages` API (`POST /messages`) stream the same thing: assistant-message events without
//! their `partial` message, one JSON object per server-sent event, from which the client
//! rebuilds the message with an [`AssistantMessageBuilder`] (so the bytes on the wire stay
//! linear in the response). [`WireEvent`] is that event, [`WireEvent::NAMES`] its types,
//! [`WireEvent::from_event`] writes one and [`Protocol::decode`] with [`Protocol::rebuild`]
//! read one. pi-messages carries more than the proxy protocol; every place where the two
//! differ is a rule of [`Protocol`], listed in the [pi-messages module docs](super).
//!
//! Members a protocol does not carry are never written for it and are dropped unread, so each
//! protocol reads and writes exactly what it would with a type of its own.

use pi_types::{
    AssistantContent, AssistantMessage, AssistantMessageEvent, CompactString, JsonObject, StopReason, Usage, UsageCost,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::js_json;

/// Which of pi's two streaming protocols a stream speaks; the
/// [pi-messages module docs](super#the-proxy-protocol) list where they differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// pi-agent-core's proxy: `POST {proxy}/api/stream`, served by `pi proxy serve`.
    Proxy,
    /// pi-ai's `pi-messages` API: `POST {baseUrl}/messages`, spoken by the Radius gateway and
    /// `pi proxy serve`.
    PiMessages,
}

/// One event on the wire: an assistant-message event without its partial message.
///
/// Optional members are written only when set; which ones a protocol carries is in the
/// [pi-messages module docs](super#the-proxy-protocol).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum WireEvent {
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
        /// The block's final text, replacing the streamed text (pi-messages only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
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
        /// The block's final reasoning text (pi-messages only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        /// The block's `thinkingSignature`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content_signature: Option<String>,
        /// Whether the reasoning was redacted (pi-messages only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        redacted: Option<bool>,
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
    /// A tool call ended; `tool_call` is the finished call as a `toolCall` content block, kept
    /// as raw JSON (pi-messages lays its members over the streamed block).
    ToolcallEnd {
        /// Index of the block.
        content_index: usize,
        /// The finished call as a content block.
        tool_call: JsonObject,
    },
    /// The response finished.
    Done {
        /// `stop`, `length` or `toolUse`.
        reason: StopReason,
        /// Usage and response metadata.
        #[serde(flatten)]
        end: WireEnd,
    },
    /// The response failed.
    Error {
        /// `error` or `aborted`.
        reason: StopReason,
        /// What went wrong.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_message: Option<Box<str>>,
        /// Usage so far and response metadata.
        #[serde(flatten)]
        end: WireEnd,
    },
}

/// What a terminal event (`done`, `error`) reports besides its reason, members of the event
/// itself on the wire.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireEnd {
    /// Usage, cost included.
    #[serde(default, deserialize_with = "lenient_usage")]
    pub usage: Usage,
    /// Provider response id (pi-messages only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<Box<str>>,
    /// Model the provider reported (pi-messages only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_model: Option<Box<str>>,
    /// Provider-native effort level used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_thinking_level: Option<Box<str>>,
    /// Summary of a server-side rewrite of the request, kept as a diagnostic (pi-messages
    /// only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<JsonObject>,
}

impl WireEnd {
    /// What `message` reports in `protocol`.
    fn of(message: &AssistantMessage, protocol: Protocol) -> Self {
        let full = protocol == Protocol::PiMessages;
        Self {
            usage: message.usage.clone(),
            response_id: message.response_id.clone().filter(|_| full),
            response_model: message.response_model.clone().filter(|_| full),
            provider_thinking_level: message.provider_thinking_level.clone(),
            rewrite: None,
        }
    }
}

impl WireEvent {
    /// The `type` of every event, in the order of the variants; an event of any other type is
    /// skipped by both protocols.
    pub const NAMES: [&'static str; 12] = [
        "start",
        "text_start",
        "text_delta",
        "text_end",
        "thinking_start",
        "thinking_delta",
        "thinking_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "done",
        "error",
    ];

    /// The wire form of an assistant-message event in `protocol`: block events read their
    /// ids, names and signatures from the event's partial message; nothing is copied per delta
    /// but the delta itself. Members the protocol does not carry stay unset.
    pub fn from_event(event: &AssistantMessageEvent, protocol: Protocol) -> Self {
        use AssistantMessageEvent as E;
        let full = protocol == Protocol::PiMessages;
        match event {
            E::Start { .. } => Self::Start,
            E::TextStart { content_index, .. } => Self::TextStart { content_index: *content_index },
            E::TextDelta { content_index, delta, .. } => {
                Self::TextDelta { content_index: *content_index, delta: delta.clone() }
            }
            E::TextEnd { content_index, content, partial } => Self::TextEnd {
                content_index: *content_index,
                content: full.then(|| content.clone()),
                content_signature: match partial.content.get(*content_index) {
                    Some(AssistantContent::Text(text)) => text.text_signature.clone(),
                    _ => None,
                },
            },
            E::ThinkingStart { content_index, .. } => Self::ThinkingStart { content_index: *content_index },
            E::ThinkingDelta { content_index, delta, .. } => {
                Self::ThinkingDelta { content_index: *content_index, delta: delta.clone() }
            }
            E::ThinkingEnd { content_index, content, partial } => {
                let block = match partial.content.get(*content_index) {
                    Some(AssistantContent::Thinking(thinking)) => Some(thinking),
                    _ => None,
                };
                Self::ThinkingEnd {
                    content_index: *content_index,
                    content: full.then(|| content.clone()),
                    content_signature: block.and_then(|b| b.thinking_signature.clone()),
                    redacted: block.and_then(|b| b.redacted).filter(|_| full),
                }
            }
            E::ToolcallStart { content_index, partial, .. } => {
                let (id, tool_name) = match partial.content.get(*content_index) {
                    Some(AssistantContent::ToolCall(call)) => (call.id.clone(), call.name.clone()),
                    _ => Default::default(),
                };
                Self::ToolcallStart { content_index: *content_index, id, tool_name }
            }
            E::ToolcallDelta { content_index, delta, .. } => {
                Self::ToolcallDelta { content_index: *content_index, delta: delta.clone() }
            }
            E::ToolcallEnd { content_index, tool_call, .. } => Self::ToolcallEnd {
                content_index: *content_index,
                tool_call: match serde_json::to_value(AssistantContent::ToolCall((**tool_call).clone())) {
                    Ok(Value::Object(map)) => map,
                    _ => JsonObject::new(),
                },
            },
            E::Done { reason, message } => Self::Done { reason: *reason, end: WireEnd::of(message, protocol) },
            E::Error { reason, error } => Self::Error {
                reason: *reason,
                error_message: error.error_message.clone(),
                end: WireEnd::of(error, protocol),
            },
        }
    }

    /// Whether this is `done` or `error`.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Done { .. } | Self::Error { .. })
    }
}

/// The failure of a proxy event that is JSON `null` (JavaScript's text for reading its type).
const NULL_EVENT: &str = "Cannot read properties of null (reading 'type')";

impl Protocol {
    /// One event's parsed JSON as a [`WireEvent`] of this protocol; `None` for an event
    /// without a known `type` (skipped). `blocks` is the number of content blocks of the
    /// message rebuilt so far (pi-messages checks the event's index against it first).
    pub fn decode(self, mut value: Value, blocks: usize) -> Result<Option<WireEvent>, String> {
        let kind = match &value {
            Value::Null if self == Self::Proxy => return Err(NULL_EVENT.into()),
            Value::Object(map) => match map.get("type") {
                Some(Value::String(kind)) => WireEvent::NAMES.iter().copied().find(|name| name == kind),
                _ => None,
            },
            _ => None,
        };
        let Some(kind) = kind else { return Ok(None) };
        match self {
            Self::PiMessages => {
                check_index(&value, kind, blocks)?;
                serde_json::from_value(value).map(Some).map_err(|e| self.invalid(kind, e))
            }
            Self::Proxy => {
                // What the proxy protocol does not carry is not read, whatever its value.
                if let Value::Object(map) = &mut value {
                    for member in pi_messages_members(kind) {
                        map.remove(*member);
                    }
                }
                // The proxy protocol's `usage` is required and read as pi-types reads it.
                let usage = match kind {
                    "done" | "error" => strict_usage(&value),
                    _ => Ok(()),
                };
                let event = serde_json::from_value(value).map_err(|e| self.invalid(kind, e))?;
                usage.map_err(|e| self.invalid(kind, e))?;
                Ok(Some(event))
            }
        }
    }

    /// The failure of an event that does not decode.
    pub(super) fn invalid(self, kind: &str, error: impl std::fmt::Display) -> String {
        match self {
            Self::Proxy => format!("Invalid proxy event: {error}"),
            Self::PiMessages => format!("Invalid pi-messages {kind} event: {error}"),
        }
    }
}

/// The members of an event of type `kind` that only pi-messages carries.
fn pi_messages_members(kind: &str) -> &'static [&'static str] {
    match kind {
        "text_end" => &["content"],
        "thinking_end" => &["content", "redacted"],
        "done" | "error" => &["responseId", "responseModel", "rewrite"],
        _ => &[],
    }
}

/// `usage` as the proxy protocol requires it: present and a well-formed usage.
fn strict_usage(event: &Value) -> Result<(), String> {
    match event.get("usage") {
        None => Err("missing field `usage`".into()),
        Some(usage) => Usage::deserialize(usage).map(drop).map_err(|e| e.to_string()),
    }
}

/// Check an event's `contentIndex` as the reference's pi-messages client does: a `*_start`
/// names the next block (pi-rs: exactly the next), any other event an existing one.
fn check_index(event: &Value, kind: &str, blocks: usize) -> Result<(), String> {
    let Some(index) = event.get("contentIndex") else { return Ok(()) };
    let valid = index.as_u64().and_then(|i| usize::try_from(i).ok()).is_some_and(|i| {
        if kind.ends_with("_start") {
            i == blocks
        } else {
            i < blocks
        }
    });
    if valid {
        Ok(())
    } else {
        Err(format!("Invalid contentIndex {} in pi-messages {kind} event", js_json::stringify(index)))
    }
}

/// Usage as a pi-messages backend reports it; numbers saturate into the token counters (the
/// reference takes the object as it is).
fn lenient_usage<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Usage, D::Error> {
    let value = Value::deserialize(deserializer)?;
    let count = |v: &Value, key: &str| v.get(key).and_then(Value::as_f64).map(|n| n.max(0.0) as u64);
    let money = |v: &Value, key: &str| v.get(key).and_then(Value::as_f64).unwrap_or(0.0);
    let cost = value.get("cost").cloned().unwrap_or(Value::Null);
    Ok(Usage {
        input: count(&value, "input").unwrap_or(0),
        output: count(&value, "output").unwrap_or(0),
        cache_read: count(&value, "cacheRead").unwrap_or(0),
        cache_write: count(&value, "cacheWrite").unwrap_or(0),
        cache_write_1h: count(&value, "cacheWrite1h"),
        reasoning: count(&value, "reasoning"),
        total_tokens: count(&value, "totalTokens").unwrap_or(0),
        cost: UsageCost {
            input: money(&cost, "input"),
            output: money(&cost, "output"),
            cache_read: money(&cost, "cacheRead"),
            cache_write: money(&cost, "cacheWrite"),
            total: money(&cost, "total"),
            total_from_provider: cost.get("totalFromProvider").and_then(Value::as_bool),
        },
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pi_types::ToolCall;
    use serde_json::json;

    #[test]
    fn events_have_the_reference_shape() {
        let call = ToolCall { id: "c1".into(), name: "f".into(), ..Default::default() };
        let tool_call = match serde_json::to_value(AssistantContent::ToolCall(call)).unwrap() {
            Value::Object(map) => map,
            _ => unreachable!(),
        };
        let cases = [
            (WireEvent::Start, json!({"type": "start"})),
            (
                WireEvent::TextEnd { content_index: 0, content: None, content_signature: None },
                json!({"type": "text_end", "contentIndex": 0}),
            ),
            (
                WireEvent::ToolcallStart { content_index: 1, id: "c1".into(), tool_name: "f".into() },
                json!({"type": "toolcall_start", "contentIndex": 1, "id": "c1", "toolName": "f"}),
            ),
            (
                WireEvent::ToolcallEnd { content_index: 1, tool_call },
                json!({"type": "toolcall_end", "contentIndex": 1,
                       "toolCall": {"type": "toolCall", "id": "c1", "name": "f", "arguments": {}}}),
            ),
            (
                WireEvent::Error {
                    reason: StopReason::Aborted,
                    error_message: Some("x".into()),
                    end: WireEnd::default(),
                },
                json!({"type": "error", "reason": "aborted", "errorMessage": "x", "usage": {
                    "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                    "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}}}),
            ),
        ];
        for (event, expected) in cases {
            let value = serde_json::to_value(&event).unwrap();
            assert_eq!(value, expected);
            // The blocks a message has when the event is valid for pi-messages.
            let blocks = match value.get("contentIndex").and_then(Value::as_u64) {
                Some(index) if matches!(event, WireEvent::ToolcallStart { .. }) => index as usize,
                Some(index) => index as usize + 1,
                None => 0,
            };
            for protocol in [Protocol::Proxy, Protocol::PiMessages] {
                assert_eq!(protocol.decode(value.clone(), blocks).unwrap(), Some(event.clone()), "{protocol:?}");
            }
        }
    }

    #[test]
    fn each_protocol_writes_and_reads_only_its_members() {
        let text = pi_types::TextContent { text: "Hi".into(), text_signature: Some("sig".into()) };
        let partial = std::sync::Arc::new(pi_types::AssistantMessage {
            content: vec![AssistantContent::Text(text)],
            ..Default::default()
        });
        let end = AssistantMessageEvent::TextEnd { content_index: 0, content: "Hi".into(), partial };
        let written = |protocol| serde_json::to_value(WireEvent::from_event(&end, protocol)).unwrap();
        assert_eq!(written(Protocol::Proxy), json!({"type": "text_end", "contentIndex": 0, "contentSignature": "sig"}));
        let full = written(Protocol::PiMessages);
        assert_eq!(full, json!({"type": "text_end", "contentIndex": 0, "content": "Hi", "contentSignature": "sig"}));
        let read = Protocol::Proxy.decode(full.clone(), 1).unwrap().unwrap();
        assert_eq!(read, WireEvent::TextEnd { content_index: 0, content: None, content_signature: Some("sig".into()) });

        let done = json!({"type": "done", "reason": "stop", "usage": {"input": 1.5}, "responseId": "r"});
        let read = Protocol::PiMessages.decode(done.clone(), 0).unwrap().unwrap();
        let WireEvent::Done { end, .. } = read else { panic!("done") };
        assert_eq!((end.usage.input, end.response_id.as_deref()), (1, Some("r")));
        assert_eq!(
            Protocol::Proxy.decode(done, 0).unwrap_err(),
            "Invalid proxy event: invalid type: floating point `1.5`, expected u64"
        );
        assert_eq!(
            Protocol::Proxy.decode(json!({"type": "done", "reason": "stop"}), 0).unwrap_err(),
            "Invalid proxy event: missing field `usage`"
        );
    }

    #[test]
    fn unknown_and_null_events() {
        for protocol in [Protocol::Proxy, Protocol::PiMessages] {
            assert_eq!(protocol.decode(json!({"type": "ping"}), 0), Ok(None));
            assert_eq!(protocol.decode(json!(5), 0), Ok(None));
            assert_eq!(protocol.decode(json!({"type": 5}), 0), Ok(None));
        }
        assert_eq!(Protocol::Proxy.decode(Value::Null, 0).unwrap_err(), NULL_EVENT);
        assert_eq!(Protocol::PiMessages.decode(Value::Null, 0), Ok(None));
        assert!(Protocol::Proxy
            .decode(json!({"type": "text_delta"}), 0)
            .unwrap_err()
            .starts_with("Invalid proxy event: "));
    }

    #[test]
    fn content_index_rules() {
        let event = json!({"type": "text_delta", "contentIndex": 1});
        assert_eq!(
            check_index(&event, "text_delta", 1).unwrap_err(),
            "Invalid contentIndex 1 in pi-messages text_delta event"
        );
        assert!(check_index(&event, "text_delta", 2).is_ok());
        let event = json!({"type": "text_start", "contentIndex": 0.5});
        assert_eq!(
            check_index(&event, "text_start", 0).unwrap_err(),
            "Invalid contentIndex 0.5 in pi-messages text_start event"
        );
        let event = json!({"type": "text_start", "contentIndex": "__proto__"});
        assert!(check_index(&event, "text_start", 0).unwrap_err().contains("\"__proto__\""));
        assert_eq!(
            Protocol::PiMessages.decode(json!({"type": "text_delta", "contentIndex": 3, "delta": "x"}), 1).unwrap_err(),
            "Invalid contentIndex 3 in pi-messages text_delta event"
        );
    }
}
