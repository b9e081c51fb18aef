//! The four standard messages of a transcript.

use std::sync::Arc;

use compact_str::CompactString;
use indexmap::IndexMap;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::content::{AssistantContent, JsonObject, TextContent, ToolCall, UserContent};
use crate::model::ThinkingLevel;
use crate::tool::{Tool, ToolReference};
use crate::usage::Usage;

/// Why a response ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// Still streaming.
    #[default]
    Pending,
    /// The model finished its answer.
    Stop,
    /// The output token limit was hit.
    Length,
    /// The model asked for tool calls.
    ToolUse,
    /// The request failed; see `error_message`.
    Error,
    /// The request was cancelled.
    Aborted,
    /// The provider continues the request asynchronously; see `deferred`.
    Deferred,
}

/// Text of a system message: a string or text blocks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SystemContent {
    /// Plain text.
    Text(String),
    /// Text blocks, each serialized with its `"type": "text"` tag as the reference keeps it.
    Blocks(Vec<SystemBlock>),
}

/// One block of a system message's content (`TextContent` in the reference's types).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum SystemBlock {
    /// A text block.
    Text(TextContent),
}

impl SystemBlock {
    /// The block's text.
    pub fn text(&self) -> &str {
        match self {
            Self::Text(block) => &block.text,
        }
    }
}

impl Default for SystemContent {
    fn default() -> Self {
        Self::Text(String::new())
    }
}

impl SystemContent {
    /// The text; blocks are joined with a newline (as the reference reads them).
    pub fn to_text(&self) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Blocks(blocks) => blocks.iter().map(SystemBlock::text).collect::<Vec<_>>().join("\n"),
        }
    }
}

/// Content of a user message: a string or text/image blocks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserMessageContent {
    /// Plain text.
    Text(String),
    /// Text and image blocks.
    Blocks(Vec<UserContent>),
}

impl UserMessageContent {
    /// The text: the string, or the text blocks joined with a newline.
    pub fn text(&self) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Blocks(blocks) => crate::content::content_text(blocks, "\n"),
        }
    }
}

impl Default for UserMessageContent {
    fn default() -> Self {
        Self::Text(String::new())
    }
}

/// System instructions and tool declarations at one point of the transcript.
///
/// The leading system message is the system prompt; later ones add `content`, replace or
/// remove `sections` by name and change the tool set. Replaying all of them in order gives
/// the current prompt and tools (see [`crate::transcript`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename = "system", rename_all = "camelCase")]
pub struct SystemMessage {
    /// Instruction text.
    pub content: SystemContent,
    /// Named, ordered prompt sections; `None` removes a section.
    ///
    /// Boxed: rarely set, and unboxed its room (56 bytes) would be in every system message a
    /// transcript keeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sections: Option<Box<IndexMap<String, Option<String>>>>,
    /// Tools that become available here (complete definitions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_added: Option<Vec<Tool>>,
    /// Tools that stop being available here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_removed: Option<Vec<ToolReference>>,
    /// Unix time in milliseconds.
    pub timestamp: u64,
}

/// A message from the user.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename = "user", rename_all = "camelCase")]
pub struct UserMessage {
    /// The content.
    pub content: UserMessageContent,
    /// Unix time in milliseconds.
    pub timestamp: u64,
}

/// Error details of a diagnostic.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiagnosticErrorInfo {
    /// Error class name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Error message.
    pub message: String,
    /// Stack trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
    /// Error code, a string or a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<DiagnosticCode>,
}

/// An error code: string or number.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DiagnosticCode {
    /// Numeric code.
    Number(serde_json::Number),
    /// Text code.
    Text(String),
}

/// Something a provider noticed while producing a response (kept for debugging).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessageDiagnostic {
    /// Kind of diagnostic.
    #[serde(rename = "type")]
    pub kind: String,
    /// Unix time in milliseconds.
    pub timestamp: u64,
    /// The error, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<DiagnosticErrorInfo>,
    /// Free-form details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<JsonObject>,
}

/// Handle of a response the provider finishes asynchronously.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeferredHandle {
    /// Provider id.
    pub provider: String,
    /// Model id.
    pub model_id: String,
    /// API id.
    pub api: String,
    /// Provider token (response id, batch id, ...).
    pub id: String,
    /// Expiry, Unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// Suggested polling delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_after_ms: Option<u64>,
    /// Provider data needed to rebuild the final message (opaque JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// A response of the model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename = "assistant", rename_all = "camelCase")]
pub struct AssistantMessage {
    /// Text, thinking and tool-call blocks.
    pub content: Vec<AssistantContent>,
    /// API that produced it (e.g. `anthropic-messages`).
    ///
    /// This and the other ids are `CompactString`s: up to 24 bytes they are stored inline, so a
    /// response (and a transcript, which keeps every one) costs no allocation per id.
    pub api: CompactString,
    /// Provider id.
    pub provider: CompactString,
    /// Requested model id.
    pub model: CompactString,
    /// Model id the provider reported, when it differs.
    ///
    /// This and the other rarely set strings are `Box<str>`s (16 bytes, not a `String`'s 24):
    /// a transcript keeps every response for good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_model: Option<Box<str>>,
    /// Provider response id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<Box<str>>,
    /// Exact provider-native effort level used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_thinking_level: Option<Box<str>>,
    /// Thinking level the agent loop requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<ThinkingLevel>,
    /// Provider diagnostics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Vec<AssistantMessageDiagnostic>>,
    /// Token usage.
    #[serde(default)]
    pub usage: Usage,
    /// Why the response ended.
    pub stop_reason: StopReason,
    /// Handle of a deferred response (boxed: rare, and every message would carry its room).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferred: Option<Box<DeferredHandle>>,
    /// What went wrong, for `error` and `aborted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<Box<str>>,
    /// The provider's own stop reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_stop_reason: Option<Box<str>>,
    /// Whether the model explicitly ended its turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_turn: Option<bool>,
    /// Unix time in milliseconds when the request started.
    pub timestamp: u64,
    /// Milliseconds until the response ended (monotonic clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

impl AssistantMessage {
    /// The tool calls of this message, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(AssistantContent::as_tool_call)
    }

    /// All text blocks concatenated.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|c| match c {
                AssistantContent::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// One tool call another tool made while it ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NestedToolCallRecord {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments, omitted when too large.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<JsonObject>,
    /// UTF-8 size of the omitted arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_bytes: Option<u64>,
    /// `ok`, `error` or `unfinished`.
    pub status: NestedCallStatus,
    /// Duration of the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Error text, truncated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Outcome of a nested tool call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NestedCallStatus {
    /// Succeeded.
    #[default]
    Ok,
    /// Failed.
    Error,
    /// Still running when the calling tool finished.
    Unfinished,
}

/// Bounded record of the nested calls a tool made.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NestedToolCalls {
    /// The calls.
    pub calls: Vec<NestedToolCallRecord>,
    /// False when calls were dropped or unfinished.
    pub complete: bool,
}

/// The result of one tool call, sent back to the model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename = "toolResult", rename_all = "camelCase")]
pub struct ToolResultMessage {
    /// Id of the call this answers (a `CompactString`, as [`ToolCall::id`] is).
    pub tool_call_id: CompactString,
    /// Name of the tool.
    pub tool_name: CompactString,
    /// Model-facing content.
    pub content: Vec<UserContent>,
    /// Structured details for logs and UIs (`None` = absent, `Some(Null)` = `null`).
    #[serde(default, deserialize_with = "crate::serde_util::present", skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// Usage of the tool execution itself (boxed: rarely set, and a transcript keeps every
    /// result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<Usage>>,
    /// Calls this tool made to other tools (boxed: rare).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_calls: Option<Box<NestedToolCalls>>,
    /// Whether the call failed.
    pub is_error: bool,
    /// Unix time in milliseconds.
    pub timestamp: u64,
    /// Milliseconds the execution took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

impl ToolResultMessage {
    /// Its text blocks joined with newlines (images skipped).
    pub fn text(&self) -> String {
        crate::content::content_text(&self.content, "\n")
    }
}

/// A message a provider understands.
///
/// Each message sits behind an `Arc`, shared with the agent transcript it was converted from:
/// building a request's transcript copies pointers, not messages. Change one in place with
/// [`Arc::make_mut`] (copied only if shared); build one with `.into()`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Message {
    /// System instructions / tool declarations.
    System(Arc<SystemMessage>),
    /// User input.
    User(Arc<UserMessage>),
    /// Model output.
    Assistant(Arc<AssistantMessage>),
    /// Tool output.
    ToolResult(Arc<ToolResultMessage>),
}

impl Message {
    /// The `role` tag.
    pub fn role(&self) -> &'static str {
        match self {
            Self::System(_) => "system",
            Self::User(_) => "user",
            Self::Assistant(_) => "assistant",
            Self::ToolResult(_) => "toolResult",
        }
    }

    /// Parse a message from a JSON object whose `role` is one of the four standard roles.
    pub fn from_json_object(role: &str, value: Value) -> Result<Self, serde_json::Error> {
        Ok(match role {
            "system" => Self::System(Arc::new(serde_json::from_value(value)?)),
            "user" => Self::User(Arc::new(serde_json::from_value(value)?)),
            "assistant" => Self::Assistant(Arc::new(serde_json::from_value(value)?)),
            "toolResult" => Self::ToolResult(Arc::new(serde_json::from_value(value)?)),
            other => return Err(serde_json::Error::custom(format!("unknown message role `{other}`"))),
        })
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let role = crate::serde_util::role_of(&value).map_err(D::Error::custom)?.to_owned();
        Message::from_json_object(&role, value).map_err(D::Error::custom)
    }
}

impl From<SystemMessage> for Message {
    fn from(m: SystemMessage) -> Self {
        Self::System(Arc::new(m))
    }
}
impl From<Arc<SystemMessage>> for Message {
    fn from(m: Arc<SystemMessage>) -> Self {
        Self::System(m)
    }
}
impl From<UserMessage> for Message {
    fn from(m: UserMessage) -> Self {
        Self::User(Arc::new(m))
    }
}
impl From<Arc<UserMessage>> for Message {
    fn from(m: Arc<UserMessage>) -> Self {
        Self::User(m)
    }
}
impl From<AssistantMessage> for Message {
    fn from(m: AssistantMessage) -> Self {
        Self::Assistant(Arc::new(m))
    }
}
impl From<Arc<AssistantMessage>> for Message {
    fn from(m: Arc<AssistantMessage>) -> Self {
        Self::Assistant(m)
    }
}
impl From<ToolResultMessage> for Message {
    fn from(m: ToolResultMessage) -> Self {
        Self::ToolResult(Arc::new(m))
    }
}
impl From<Arc<ToolResultMessage>> for Message {
    fn from(m: Arc<ToolResultMessage>) -> Self {
        Self::ToolResult(m)
    }
}

impl UserMessage {
    /// A text message stamped with the current time.
    pub fn text(text: impl Into<String>) -> Self {
        Self { content: UserMessageContent::Text(text.into()), timestamp: crate::now_ms() }
    }
}
