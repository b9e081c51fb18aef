//! Events: what a provider stream yields and what an agent run emits.
//!
//! # Ownership of the growing message
//! A provider keeps its partial message in an `Arc<AssistantMessage>` and puts a clone of
//! that `Arc` (a pointer copy) into each event. Before applying the next delta it calls
//! [`Arc::make_mut`]: when every consumer has dropped the previous event, which is what
//! the loop and a listener that only reads do, the message is mutated in place and a
//! response costs time linear in its length. A consumer that keeps an event keeps an
//! immutable snapshot: the provider then copies the message once, on its next delta (copy
//! on write). So `partial` is exactly "the message right after this event" whoever holds it.
//!
//! A delta's text is a [`CompactString`]: up to 24 bytes (a streamed token, usually) it lives
//! inside the event, so neither sending nor dropping an event allocates. It derefs to `str`;
//! build one from a `&str` or `String` with `.into()`.

use std::sync::Arc;

use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent_message::AgentMessage;
use crate::content::ToolCall;
use crate::message::{AssistantMessage, StopReason, ToolResultMessage};
use crate::tool::AgentToolResult;

/// One step of a streamed assistant response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum AssistantMessageEvent {
    /// The response started.
    Start {
        /// The message so far.
        partial: Arc<AssistantMessage>,
    },
    /// A text block started.
    TextStart {
        /// Index of the block in `content`.
        content_index: usize,
        /// The message so far.
        partial: Arc<AssistantMessage>,
    },
    /// Text was appended.
    TextDelta {
        /// Index of the block.
        content_index: usize,
        /// The new text.
        delta: CompactString,
        /// The message so far.
        partial: Arc<AssistantMessage>,
    },
    /// A text block ended.
    TextEnd {
        /// Index of the block.
        content_index: usize,
        /// The block's final text.
        content: String,
        /// The message so far.
        partial: Arc<AssistantMessage>,
    },
    /// A thinking block started.
    ThinkingStart {
        /// Index of the block.
        content_index: usize,
        /// The message so far.
        partial: Arc<AssistantMessage>,
    },
    /// Reasoning was appended.
    ThinkingDelta {
        /// Index of the block.
        content_index: usize,
        /// The new text.
        delta: CompactString,
        /// The message so far.
        partial: Arc<AssistantMessage>,
    },
    /// A thinking block ended.
    ThinkingEnd {
        /// Index of the block.
        content_index: usize,
        /// The block's final text.
        content: String,
        /// The message so far.
        partial: Arc<AssistantMessage>,
    },
    /// A tool call started.
    ToolcallStart {
        /// Index of the block.
        content_index: usize,
        /// The call's id and tool name, repeated on the event by a protocol whose start event
        /// carries them (pi-messages: the reference passes its wire event through); `None`
        /// for every other source. Boxed: the variant stays no larger than the others.
        #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
        announced: Option<Box<ToolCallAnnouncement>>,
        /// The message so far.
        partial: Arc<AssistantMessage>,
    },
    /// Argument text was appended (the block holds the parsed partial arguments).
    ToolcallDelta {
        /// Index of the block.
        content_index: usize,
        /// The new argument text.
        delta: CompactString,
        /// The message so far.
        partial: Arc<AssistantMessage>,
    },
    /// A tool call ended.
    ToolcallEnd {
        /// Index of the block.
        content_index: usize,
        /// The finished call (serialized as a `toolCall` content block).
        #[serde(with = "tagged_tool_call")]
        tool_call: Box<ToolCall>,
        /// The message so far.
        partial: Arc<AssistantMessage>,
    },
    /// The response finished (`stop`, `length`, `toolUse` or `deferred`).
    Done {
        /// Why.
        reason: StopReason,
        /// The final message.
        message: Arc<AssistantMessage>,
    },
    /// The response failed (`error` or `aborted`).
    Error {
        /// Why.
        reason: StopReason,
        /// The final message, with `error_message`.
        error: Arc<AssistantMessage>,
    },
}

/// The id and tool name a `toolcall_start` event repeats (see
/// [`AssistantMessageEvent::ToolcallStart`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallAnnouncement {
    /// Call id.
    pub id: CompactString,
    /// Tool name.
    pub tool_name: CompactString,
}

impl AssistantMessageEvent {
    /// The wire name of the event type.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Start { .. } => "start",
            Self::TextStart { .. } => "text_start",
            Self::TextDelta { .. } => "text_delta",
            Self::TextEnd { .. } => "text_end",
            Self::ThinkingStart { .. } => "thinking_start",
            Self::ThinkingDelta { .. } => "thinking_delta",
            Self::ThinkingEnd { .. } => "thinking_end",
            Self::ToolcallStart { .. } => "toolcall_start",
            Self::ToolcallDelta { .. } => "toolcall_delta",
            Self::ToolcallEnd { .. } => "toolcall_end",
            Self::Done { .. } => "done",
            Self::Error { .. } => "error",
        }
    }

    /// The partial message of a `start` or block event.
    pub fn partial(&self) -> Option<&Arc<AssistantMessage>> {
        match self {
            Self::Start { partial }
            | Self::TextStart { partial, .. }
            | Self::TextDelta { partial, .. }
            | Self::TextEnd { partial, .. }
            | Self::ThinkingStart { partial, .. }
            | Self::ThinkingDelta { partial, .. }
            | Self::ThinkingEnd { partial, .. }
            | Self::ToolcallStart { partial, .. }
            | Self::ToolcallDelta { partial, .. }
            | Self::ToolcallEnd { partial, .. } => Some(partial),
            Self::Done { .. } | Self::Error { .. } => None,
        }
    }

    /// The index of the content block a block event is about (`None` for `start`, `done`
    /// and `error`).
    pub fn content_index(&self) -> Option<usize> {
        match self {
            Self::TextStart { content_index, .. }
            | Self::TextDelta { content_index, .. }
            | Self::TextEnd { content_index, .. }
            | Self::ThinkingStart { content_index, .. }
            | Self::ThinkingDelta { content_index, .. }
            | Self::ThinkingEnd { content_index, .. }
            | Self::ToolcallStart { content_index, .. }
            | Self::ToolcallDelta { content_index, .. }
            | Self::ToolcallEnd { content_index, .. } => Some(*content_index),
            Self::Start { .. } | Self::Done { .. } | Self::Error { .. } => None,
        }
    }

    /// The final message of a terminal (`done`/`error`) event.
    pub fn final_message(&self) -> Option<&Arc<AssistantMessage>> {
        match self {
            Self::Done { message, .. } => Some(message),
            Self::Error { error, .. } => Some(error),
            _ => None,
        }
    }

    /// Whether this is `done` or `error`.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Done { .. } | Self::Error { .. })
    }
}

/// What an agent run emits, for UIs and logs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum AgentEvent {
    /// The run started.
    AgentStart,
    /// The run ended; the messages it added.
    AgentEnd {
        /// New messages of the run.
        messages: Vec<AgentMessage>,
    },
    /// A turn (one response and its tool calls) started.
    TurnStart,
    /// A turn ended.
    TurnEnd {
        /// The turn's assistant message.
        message: AgentMessage,
        /// Its tool results.
        tool_results: Vec<ToolResultMessage>,
    },
    /// A message entered the transcript (assistant: streaming begins).
    MessageStart {
        /// The message (assistant: the partial).
        message: AgentMessage,
    },
    /// The streaming assistant message changed.
    MessageUpdate {
        /// The message so far (shared with the provider; see the module docs).
        message: Arc<AssistantMessage>,
        /// The provider event.
        assistant_message_event: AssistantMessageEvent,
    },
    /// A message is complete.
    MessageEnd {
        /// The final message.
        message: AgentMessage,
    },
    /// A tool call starts preparation.
    ToolExecutionStart {
        /// Call id.
        tool_call_id: CompactString,
        /// Tool name.
        tool_name: CompactString,
        /// Raw (unvalidated) arguments (boxed, as in the update: an event is moved through
        /// every future that emits it, and the arguments would double its size).
        args: Box<Value>,
    },
    /// A running tool reported progress.
    ToolExecutionUpdate {
        /// Call id.
        tool_call_id: CompactString,
        /// Tool name.
        tool_name: CompactString,
        /// Raw arguments.
        args: Box<Value>,
        /// The progress.
        partial_result: Box<AgentToolResult>,
    },
    /// A tool call finished.
    ToolExecutionEnd {
        /// Call id.
        tool_call_id: CompactString,
        /// Tool name.
        tool_name: CompactString,
        /// The final result.
        result: Box<AgentToolResult>,
        /// Whether it failed.
        is_error: bool,
        /// How long `execute` took; absent when the tool did not run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
}

impl AgentEvent {
    /// The wire name of the event type.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::AgentStart => "agent_start",
            Self::AgentEnd { .. } => "agent_end",
            Self::TurnStart => "turn_start",
            Self::TurnEnd { .. } => "turn_end",
            Self::MessageStart { .. } => "message_start",
            Self::MessageUpdate { .. } => "message_update",
            Self::MessageEnd { .. } => "message_end",
            Self::ToolExecutionStart { .. } => "tool_execution_start",
            Self::ToolExecutionUpdate { .. } => "tool_execution_update",
            Self::ToolExecutionEnd { .. } => "tool_execution_end",
        }
    }
}

/// `toolcall_end.toolCall` is a content block on the wire, `type` included.
mod tagged_tool_call {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::content::{AssistantContent, ToolCall};

    // serde's `with` hands over the field itself.
    #[allow(clippy::borrowed_box)]
    pub(super) fn serialize<S: Serializer>(call: &Box<ToolCall>, serializer: S) -> Result<S::Ok, S::Error> {
        AssistantContent::ToolCall((**call).clone()).serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Box<ToolCall>, D::Error> {
        match AssistantContent::deserialize(deserializer)? {
            AssistantContent::ToolCall(call) => Ok(Box::new(call)),
            _ => Err(D::Error::custom("expected a toolCall block")),
        }
    }
}
