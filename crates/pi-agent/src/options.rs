//! Construction options of an [`crate::Agent`]: initial state, stream function, hooks and
//! request settings.

use std::str::FromStr;
use std::sync::Arc;

use futures::future::BoxFuture;
use pi_loop::{
    AfterToolCallFn, BeforeToolCallFn, ConvertToLlmFn, FinishTurnFn, GetApiKeyFn, HookResult, PrepareRequestFn,
    TransformContextFn, TurnContext, TurnUpdate,
};
use pi_types::CancellationToken;
use pi_types::{
    AgentMessage, AgentTool, ClientIdentity, InputModality, Model, OnPayload, OnProviderStreamEvent, OnResponse,
    StreamFn, ThinkingBudgets, ThinkingLevel, ToolExecutionMode, Transport,
};
use serde::{Deserialize, Serialize};

/// How a steering or follow-up queue hands out its messages at each poll.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum QueueMode {
    /// Every queued message at once.
    #[serde(rename = "all")]
    All,
    /// The oldest queued message only (the default).
    #[default]
    #[serde(rename = "one-at-a-time")]
    OneAtATime,
}

impl QueueMode {
    /// The wire name (`"all"` / `"one-at-a-time"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::OneAtATime => "one-at-a-time",
        }
    }
}

impl FromStr for QueueMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "all" => Ok(Self::All),
            "one-at-a-time" => Ok(Self::OneAtATime),
            other => Err(format!("unknown queue mode \"{other}\"")),
        }
    }
}

/// `prepare_next_turn` without the completed turn: gets only the run's cancellation token.
pub type PrepareNextTurnFn =
    Arc<dyn Fn(CancellationToken) -> BoxFuture<'static, HookResult<Option<TurnUpdate>>> + Send + Sync>;

/// `prepare_next_turn` with the completed turn (the reference's `prepareNextTurnWithContext`).
/// Takes precedence over [`PrepareNextTurnFn`] when both are set.
pub type PrepareNextTurnWithContextFn = Arc<
    dyn for<'a> Fn(&'a TurnContext<'a>, &'a CancellationToken) -> BoxFuture<'a, HookResult<Option<TurnUpdate>>>
        + Send
        + Sync,
>;

/// The state an agent starts from.
///
/// `system_prompt` and the declarations of `tools` become a leading system message unless
/// `messages` already starts with one, or there is neither a prompt nor a tool.
#[derive(Clone, Default)]
pub struct AgentInitialState {
    /// System prompt text.
    pub system_prompt: Option<String>,
    /// Model of the requests; default: a placeholder model with id, api and provider `"unknown"`.
    /// Shared: agents given one `Arc` hold one copy.
    pub model: Option<Arc<Model>>,
    /// Requested thinking level (default `Off`).
    pub thinking_level: ThinkingLevel,
    /// Executable tools.
    pub tools: Vec<Arc<dyn AgentTool>>,
    /// Initial transcript.
    pub messages: Vec<AgentMessage>,
}

impl std::fmt::Debug for AgentInitialState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(|t| t.spec().name()).collect();
        f.debug_struct("AgentInitialState")
            .field("system_prompt", &self.system_prompt.as_ref().map(|p| p.len()))
            .field("model", &self.model.as_ref().map(|m| &m.id))
            .field("thinking_level", &self.thinking_level)
            .field("tools", &tools)
            .field("messages", &self.messages.len())
            .finish()
    }
}

/// The model an agent uses when none is given (the reference's `DEFAULT_MODEL`).
pub fn default_model() -> Model {
    Model {
        id: "unknown".into(),
        name: "unknown".into(),
        api: "unknown".into(),
        provider: "unknown".into(),
        input: Vec::<InputModality>::new(),
        ..Default::default()
    }
}

/// Everything an [`crate::Agent`] is built from (the reference's `AgentOptions`).
///
/// Rust has no process-wide default stream function: [`AgentOptions::new`] takes one
/// explicitly (a provider registry, a single provider, or a scripted provider in tests).
/// The hooks have the types of [`pi_loop::LoopConfig`]; see there for their contracts.
#[derive(Clone)]
pub struct AgentOptions {
    /// Initial state.
    pub initial_state: AgentInitialState,
    /// The provider entry point of every request.
    pub stream_fn: Arc<dyn StreamFn>,
    /// Transcript → provider messages; default keeps `system`, `user`, `assistant`, `toolResult`.
    pub convert_to_llm: Option<ConvertToLlmFn>,
    /// Transcript transform before `convert_to_llm`.
    pub transform_context: Option<TransformContextFn>,
    /// Fresh API key per request.
    pub get_api_key: Option<GetApiKeyFn>,
    /// Payload hook, forwarded to the stream function.
    pub on_payload: Option<OnPayload>,
    /// HTTP response hook, forwarded to the stream function.
    pub on_response: Option<OnResponse>,
    /// Raw provider event hook, forwarded to the stream function.
    pub on_provider_stream_event: Option<OnProviderStreamEvent>,
    /// Before each tool executes.
    pub before_tool_call: Option<BeforeToolCallFn>,
    /// After each tool executed.
    pub after_tool_call: Option<AfterToolCallFn>,
    /// Decide after each turn, before `turn_end`.
    pub finish_turn: Option<FinishTurnFn>,
    /// Adjust each request right before it is sent.
    pub prepare_request: Option<PrepareRequestFn>,
    /// Adjust the next turn (token-only form).
    pub prepare_next_turn: Option<PrepareNextTurnFn>,
    /// Adjust the next turn, seeing the completed turn (wins over `prepare_next_turn`).
    pub prepare_next_turn_with_context: Option<PrepareNextTurnWithContextFn>,
    /// How the steering queue is drained (default one at a time).
    pub steering_mode: QueueMode,
    /// How the follow-up queue is drained (default one at a time).
    pub follow_up_mode: QueueMode,
    /// Session id forwarded to providers.
    pub session_id: Option<String>,
    /// Token budgets per thinking level.
    pub thinking_budgets: Option<Arc<ThinkingBudgets>>,
    /// Preferred transport (default `Auto`).
    pub transport: Transport,
    /// Cap on provider-requested retry delays.
    pub max_retry_delay_ms: Option<u64>,
    /// Request identity.
    pub identity: Option<Arc<ClientIdentity>>,
    /// Parallel (default) or sequential tool execution.
    pub tool_execution: ToolExecutionMode,
}

impl std::fmt::Debug for AgentOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentOptions")
            .field("initial_state", &self.initial_state)
            .field("steering_mode", &self.steering_mode)
            .field("follow_up_mode", &self.follow_up_mode)
            .field("session_id", &self.session_id)
            .field("transport", &self.transport)
            .field("tool_execution", &self.tool_execution)
            .finish_non_exhaustive()
    }
}

impl AgentOptions {
    /// Options with this stream function, an empty initial state and no hooks.
    pub fn new(stream_fn: Arc<dyn StreamFn>) -> Self {
        Self {
            initial_state: AgentInitialState::default(),
            stream_fn,
            convert_to_llm: None,
            transform_context: None,
            get_api_key: None,
            on_payload: None,
            on_response: None,
            on_provider_stream_event: None,
            before_tool_call: None,
            after_tool_call: None,
            finish_turn: None,
            prepare_request: None,
            prepare_next_turn: None,
            prepare_next_turn_with_context: None,
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            session_id: None,
            thinking_budgets: None,
            transport: Transport::Auto,
            max_retry_delay_ms: None,
            identity: None,
            tool_execution: ToolExecutionMode::Parallel,
        }
    }

    /// Set the system prompt.
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.initial_state.system_prompt = Some(prompt.into());
        self
    }

    /// Set the model (a `Model`, or an `Arc<Model>` that many agents share).
    pub fn with_model(mut self, model: impl Into<Arc<Model>>) -> Self {
        self.initial_state.model = Some(model.into());
        self
    }

    /// Set the thinking level.
    pub fn with_thinking_level(mut self, level: ThinkingLevel) -> Self {
        self.initial_state.thinking_level = level;
        self
    }

    /// Add an executable tool.
    pub fn with_tool(mut self, tool: impl AgentTool) -> Self {
        self.initial_state.tools.push(Arc::new(tool));
        self
    }

    /// Set the executable tools.
    pub fn with_tools(mut self, tools: impl IntoIterator<Item = Arc<dyn AgentTool>>) -> Self {
        self.initial_state.tools = tools.into_iter().collect();
        self
    }

    /// Set the initial transcript.
    pub fn with_messages(mut self, messages: impl IntoIterator<Item = AgentMessage>) -> Self {
        self.initial_state.messages = messages.into_iter().collect();
        self
    }

    /// Set the tool execution mode.
    pub fn with_tool_execution(mut self, mode: ToolExecutionMode) -> Self {
        self.tool_execution = mode;
        self
    }

    /// Set the steering queue mode.
    pub fn with_steering_mode(mut self, mode: QueueMode) -> Self {
        self.steering_mode = mode;
        self
    }

    /// Set the follow-up queue mode.
    pub fn with_follow_up_mode(mut self, mode: QueueMode) -> Self {
        self.follow_up_mode = mode;
        self
    }

    /// Set the session id.
    pub fn with_session_id(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }
}
