//! Wire types, transcript rules and streaming primitives of the pi agent runtime.
//!
//! `pi-types` is the layer every other pi crate stands on. It reads and writes the JSON of
//! the TypeScript reference (`@earendil-works/pi-ai` / `@earendil-works/pi-agent-core`)
//! field for field: messages and content blocks, usage, models, the assistant-message
//! stream events and the agent events, tool declarations; the [`AssistantMessageBuilder`] that
//! every provider (built-in or your own) turns its deltas into events with; and it holds the rules and
//! helpers that must behave exactly like the reference: transcript replay and tool diffs.
//! JavaScript-exact JSON text and the tolerant streaming JSON parser live in `pi-json`, re-exported
//! as [`json`]; tool-argument validation lives in `pi-schema`, re-exported as [`validation`].
//!
//! ```
//! use pi_types::{AgentMessage, Message, UserMessage};
//! let json = r#"{"role":"user","content":"Weather in Oslo?","timestamp":0}"#;
//! let message: AgentMessage = serde_json::from_str(json).unwrap();
//! assert_eq!(message.role(), "user");
//! assert_eq!(serde_json::to_string(&message).unwrap(), json);
//! ```

mod agent_message;
mod builder;
mod cancel;
mod content;
mod error;
mod event;
mod message;
mod model;
mod options;
mod push;
mod reduce;
mod serde_util;
mod stream;
mod tool;
pub mod transcript;
mod usage;

/// JavaScript-exact JSON text and the streaming JSON parser (the `pi-json` crate).
pub use pi_json as json;
/// Tool-argument validation against JSON Schema (the `pi-schema` crate).
pub use pi_schema as validation;

pub use agent_message::{default_convert_to_llm, AgentMessage, CustomMessage, CustomMessageKind, RawCustomMessage};
pub use builder::{AssistantMessageBuilder, Handover, MetadataMut, ToolCallMut};
pub use cancel::{CancelGuard, CancellationToken};
pub use compact_str::CompactString;
pub use content::{
    content_text, AssistantContent, ImageContent, JsonObject, TextContent, ThinkingContent, ToolCall, UserContent,
};
pub use error::{catch_call, catch_failure, catch_panic, panic_message, BoxError, TypesError};
pub use event::{AgentEvent, AssistantMessageEvent, ToolCallAnnouncement};
pub use message::{
    AssistantMessage, AssistantMessageDiagnostic, DeferredHandle, DiagnosticCode, DiagnosticErrorInfo, Message,
    NestedCallStatus, NestedToolCallRecord, NestedToolCalls, StopReason, SystemBlock, SystemContent, SystemMessage,
    ToolResultMessage, UserMessage, UserMessageContent,
};
pub use model::{InputModality, Model, ModelCost, ModelCostTier, ModelPromptCache, ThinkingLevel, ThinkingLevelMap};
pub use options::server_retry_delay_ms;
pub use options::{
    ApiOptions, CacheRetention, ClientAttribution, ClientIdentity, DeferredRequest, DeferredWindow, HttpClientHandle,
    OnPayload, OnProviderStreamEvent, OnResponse, ProviderResponse, RequestHeaders, StreamOptions, ThinkingBudgets,
    ToolChoice, Transport, UserAgentMode,
};
pub use pi_schema::schema_for;
// The push protocol between a response's stream and the agent loop: public because pi-loop,
// another crate, registers its consumer with it (see `EventConsumer`).
pub use push::{Consumed, EventConsumer};
pub use reduce::StreamFollower;
pub use stream::{AssistantMessageEventStream, EventSender, Layered, SendEvent, SendOwned, StreamFn, StreamLayer};
pub use tool::{
    AgentTool, AgentToolResult, ConstrainedSampling, FnTool, ReplayPolicy, Strictness, Tool, ToolCallContext,
    ToolExecutionMode, ToolReference, ToolSpec, ToolUpdateFn,
};
pub use transcript::{Context, TranscriptContext};
pub use usage::{Usage, UsageCost};

/// Milliseconds since the Unix epoch (`Date.now()`).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}
