//! Configuration of a run: model, request options, stream function and every hook.
//!
//! Hooks are async, may be closures, and cost nothing when unset (`None`). A hook that
//! returns `Err(e)` or panics is the reference's thrown error with message `e.to_string()`
//! (or the panic's text): inside tool handling it becomes an error tool result; elsewhere
//! the run ends with [`crate::LoopError::Hook`].
//!
//! Hooks that look at the transcript borrow it (`for<'a> Fn(&'a X<'a>) -> BoxFuture<'a, _>`):
//! nothing is copied per turn. Write them as `|turn, cancel| Box::pin(async move { ... })`.

use std::sync::Arc;

use futures::future::BoxFuture;
use pi_types::CancellationToken;
use pi_types::{
    AgentMessage, AgentTool, AgentToolResult, AssistantMessage, BoxError, Message, MessageList, Model, StreamFn,
    StreamOptions, ThinkingLevel, ToolCall, ToolExecutionMode, ToolResultMessage, Usage, UserContent,
};
use serde_json::Value;

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

/// Result of a hook: `Err` is a thrown error.
pub type HookResult<T> = Result<T, BoxError>;

/// `convert_to_llm`.
pub type ConvertToLlmFn =
    Arc<dyn for<'a> Fn(&'a [AgentMessage]) -> BoxFuture<'a, HookResult<Vec<Message>>> + Send + Sync>;
/// `transform_context`.
pub type TransformContextFn = Arc<
    dyn for<'a> Fn(&'a [AgentMessage], &'a CancellationToken) -> BoxFuture<'a, HookResult<Vec<AgentMessage>>>
        + Send
        + Sync,
>;
/// `get_api_key`: the key for a provider id.
pub type GetApiKeyFn = Arc<dyn Fn(String) -> BoxFuture<'static, HookResult<Option<String>>> + Send + Sync>;
/// `finish_turn`.
pub type FinishTurnFn = Arc<
    dyn for<'a> Fn(&'a TurnContext<'a>, &'a CancellationToken) -> BoxFuture<'a, HookResult<Option<TurnDecision>>>
        + Send
        + Sync,
>;
/// `prepare_request`.
pub type PrepareRequestFn = Arc<
    dyn for<'a> Fn(&'a RequestContext<'a>, &'a CancellationToken) -> BoxFuture<'a, HookResult<Option<RequestUpdate>>>
        + Send
        + Sync,
>;
/// `prepare_next_turn`.
pub type PrepareNextTurnFn =
    Arc<dyn for<'a> Fn(&'a TurnContext<'a>) -> BoxFuture<'a, HookResult<Option<TurnUpdate>>> + Send + Sync>;
/// `get_steering_messages` / `get_follow_up_messages` (must not fail).
pub type MessageSourceFn = Arc<dyn Fn() -> BoxFuture<'static, Vec<AgentMessage>> + Send + Sync>;
/// `before_tool_call`.
pub type BeforeToolCallFn = Arc<
    dyn for<'a> Fn(
            &'a BeforeToolCallContext<'a>,
            &'a CancellationToken,
        ) -> BoxFuture<'a, HookResult<Option<BeforeToolCallResult>>>
        + Send
        + Sync,
>;
/// `after_tool_call`.
pub type AfterToolCallFn = Arc<
    dyn for<'a> Fn(
            &'a AfterToolCallContext<'a>,
            &'a CancellationToken,
        ) -> BoxFuture<'a, HookResult<Option<AfterToolCallResult>>>
        + Send
        + Sync,
>;

/// Configuration of one run (the reference's `AgentLoopConfig`).
#[derive(Clone)]
pub struct LoopConfig {
    /// The model of the requests (shared: an agent's runs and their requests hold one copy).
    pub model: Arc<Model>,
    /// Request options: temperature, max tokens, reasoning, session id, API key, headers, ...
    /// (`cancel` is set by the loop).
    pub options: StreamOptions,
    /// The provider entry point.
    pub stream_fn: Arc<dyn StreamFn>,
    /// Transcript → provider messages; default keeps the standard roles.
    pub convert_to_llm: Option<ConvertToLlmFn>,
    /// Transcript transform before `convert_to_llm` (pruning, injection).
    pub transform_context: Option<TransformContextFn>,
    /// Fresh API key per request; an empty or absent key falls back to `options.api_key`.
    pub get_api_key: Option<GetApiKeyFn>,
    /// Decide after each turn, before `turn_end`.
    pub finish_turn: Option<FinishTurnFn>,
    /// Adjust each request right before it is sent.
    pub prepare_request: Option<PrepareRequestFn>,
    /// Adjust the next turn after `turn_end`.
    pub prepare_next_turn: Option<PrepareNextTurnFn>,
    /// Messages typed while the agent works.
    pub get_steering_messages: Option<MessageSourceFn>,
    /// Messages to handle when the agent would stop.
    pub get_follow_up_messages: Option<MessageSourceFn>,
    /// Before each tool executes (after validation).
    pub before_tool_call: Option<BeforeToolCallFn>,
    /// After each tool executed.
    pub after_tool_call: Option<AfterToolCallFn>,
    /// Parallel (default) or sequential tool execution.
    pub tool_execution: ToolExecutionMode,
    /// Provider messages converted by earlier runs of the same growing transcript: a run then
    /// converts only its new messages (see [`crate::TranscriptCache`] for the contract).
    pub transcript_cache: Option<crate::TranscriptCache>,
}

impl std::fmt::Debug for LoopConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopConfig")
            .field("model", &self.model.id)
            .field("options", &self.options)
            .field("tool_execution", &self.tool_execution)
            .finish_non_exhaustive()
    }
}

impl LoopConfig {
    /// A configuration with no hooks.
    pub fn new(model: impl Into<Arc<Model>>, stream_fn: Arc<dyn StreamFn>) -> Self {
        Self {
            model: model.into(),
            options: StreamOptions::default(),
            stream_fn,
            convert_to_llm: None,
            transform_context: None,
            get_api_key: None,
            finish_turn: None,
            prepare_request: None,
            prepare_next_turn: None,
            get_steering_messages: None,
            get_follow_up_messages: None,
            before_tool_call: None,
            after_tool_call: None,
            tool_execution: ToolExecutionMode::Parallel,
            transcript_cache: None,
        }
    }

    /// The older `shouldStopAfterTurn` hook: `true` ends the run after this turn. A thin
    /// convenience over `finish_turn` (it replaces any `finish_turn`).
    pub fn with_should_stop_after_turn<F>(mut self, should_stop: F) -> Self
    where
        F: Fn(&TurnContext<'_>) -> bool + Send + Sync + 'static,
    {
        self.finish_turn = Some(Arc::new(move |turn, _cancel| {
            let stop = should_stop(turn);
            Box::pin(async move { Ok(stop.then_some(TurnDecision::End)) })
        }));
        self
    }
}
