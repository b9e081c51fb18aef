//! What the hooks see and answer: the run's context, a completed turn, the next request and
//! each tool call, and the updates and decisions the hooks give back.

use std::sync::Arc;

use pi_types::{
    AgentMessage, AgentTool, AgentToolResult, AssistantMessage, Model, ThinkingLevel, ToolCall, ToolResultMessage,
    Usage, UserContent,
};
use serde_json::Value;

use crate::message_list::MessageList;

/// The transcript and the executable tools of a run.
#[derive(Clone, Default)]
pub struct AgentContext {
    /// Transcript visible to the model: shared structurally with whoever else holds it (the
    /// agent's state), so handing a long conversation to a run copies nothing.
    pub messages: MessageList,
    /// Tools that can be executed in this run.
    pub tools: Vec<Arc<dyn AgentTool>>,
}

impl std::fmt::Debug for AgentContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(|t| t.spec().name()).collect();
        f.debug_struct("AgentContext").field("messages", &self.messages.len()).field("tools", &tools).finish()
    }
}

impl AgentContext {
    /// A context of messages and tools.
    pub fn new(messages: impl Into<MessageList>, tools: Vec<Arc<dyn AgentTool>>) -> Self {
        Self { messages: messages.into(), tools }
    }

    /// The executable tool of that name.
    pub fn tool(&self, name: &str) -> Option<&Arc<dyn AgentTool>> {
        self.tools.iter().find(|t| t.spec().name() == name)
    }
}

/// A completed turn, as `finish_turn` and `prepare_next_turn` see it.
#[derive(Clone, Copy, Debug)]
pub struct TurnContext<'a> {
    /// The assistant message that completed the turn.
    pub message: &'a AssistantMessage,
    /// Its tool results.
    pub tool_results: &'a [ToolResultMessage],
    /// The run's context after the turn's messages were appended.
    pub context: &'a AgentContext,
    /// Messages the run would return if it ended here.
    pub new_messages: &'a [AgentMessage],
}

/// What `finish_turn` decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TurnDecision {
    /// Make sure one more request happens.
    Continue,
    /// End the run now, polling nothing.
    End,
}

/// Replacement state for the next turn (from `prepare_next_turn`).
#[derive(Clone, Debug, Default)]
pub struct TurnUpdate {
    /// Context for the next request.
    pub context: Option<AgentContext>,
    /// Messages to append before the next request.
    pub messages: Option<Vec<AgentMessage>>,
    /// Model for the next request.
    pub model: Option<Model>,
    /// Thinking level for the next request (`Off` disables reasoning).
    pub thinking_level: Option<ThinkingLevel>,
}

/// The state right before a request (for `prepare_request`).
#[derive(Clone, Copy, Debug)]
pub struct RequestContext<'a> {
    /// The run's context.
    pub context: &'a AgentContext,
    /// The model.
    pub model: &'a Model,
    /// The thinking level (`Off` when none).
    pub thinking_level: ThinkingLevel,
}

/// Replacement state for the request being prepared.
#[derive(Clone, Debug, Default)]
pub struct RequestUpdate {
    /// Context for this and later requests.
    pub context: Option<AgentContext>,
    /// Model.
    pub model: Option<Model>,
    /// Thinking level.
    pub thinking_level: Option<ThinkingLevel>,
}

/// What `before_tool_call` sees.
#[derive(Clone, Copy, Debug)]
pub struct BeforeToolCallContext<'a> {
    /// The assistant message with the call.
    pub assistant_message: &'a AssistantMessage,
    /// The raw tool-call block.
    pub tool_call: &'a ToolCall,
    /// The validated arguments.
    pub args: &'a Value,
    /// The run's context.
    pub context: &'a AgentContext,
}

/// What `before_tool_call` may answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BeforeToolCallResult {
    /// Do not execute; an error result is recorded instead.
    pub block: bool,
    /// Text of that error result (empty or absent: "Tool execution was blocked").
    pub reason: Option<String>,
    /// Ask to stop after the batch when blocked.
    pub terminate: Option<bool>,
}

/// What `after_tool_call` sees.
#[derive(Clone, Copy, Debug)]
pub struct AfterToolCallContext<'a> {
    /// The assistant message with the call.
    pub assistant_message: &'a AssistantMessage,
    /// The raw tool-call block.
    pub tool_call: &'a ToolCall,
    /// The validated arguments.
    pub args: &'a Value,
    /// The executed result, before overrides.
    pub result: &'a AgentToolResult,
    /// Whether it counts as an error.
    pub is_error: bool,
    /// The run's context.
    pub context: &'a AgentContext,
}

/// Field-by-field overrides from `after_tool_call`. A field that is `None` (or a JSON
/// `null` in `details`/`structured_content`) keeps the executed value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AfterToolCallResult {
    /// Replaces the content; without `structured_content` it drops the structured content.
    pub content: Option<Vec<UserContent>>,
    /// Replaces the details.
    pub details: Option<Value>,
    /// Replaces the structured content.
    pub structured_content: Option<Value>,
    /// Replaces the error flag.
    pub is_error: Option<bool>,
    /// Replaces the usage.
    pub usage: Option<Usage>,
    /// Replaces the terminate hint.
    pub terminate: Option<bool>,
}
