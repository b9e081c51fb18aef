//! Construction options of an [`crate::Agent`]: initial state, stream function, hooks and
//! request settings.

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;

use pi_loop::{
    AfterToolCallContext, AfterToolCallResult, BeforeToolCallContext, BeforeToolCallResult, HookResult, Hooks,
    RequestContext, RequestUpdate, TurnContext, TurnDecision, TurnUpdate,
};
use pi_types::CancellationToken;
use pi_types::{
    AgentMessage, AgentTool, ApiOptions, ClientIdentity, InputModality, Message, Model, ProviderResponse, StreamFn,
    ThinkingBudgets, ThinkingLevel, ToolExecutionMode, Transport,
};
use serde::{Deserialize, Serialize};

use crate::retry::RetryPolicy;
use crate::usage::UsageTotal;
use serde_json::Value;

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
/// The hooks are set with the builder methods, which take ordinary closures (see
/// [`pi_loop::Hooks`] for how hooks see the run), or all at once with
/// [`AgentOptions::with_hooks`].
///
/// ```
/// use std::sync::Arc;
/// use pi_agent::{Agent, AgentOptions};
/// use pi_agent::pi_types::StopReason;
/// use pi_agent::pi_loop::BeforeToolCallResult;
/// use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider, FauxResponse};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let faux = FauxProvider::default();
/// faux.set_responses([FauxResponse::Message(faux_assistant_message(vec![faux_text("Hi!")], StopReason::Stop))]);
/// let options = AgentOptions::new(Arc::new(faux.clone()))
///     .with_model(faux.model())
///     .before_tool_call(|ctx, _cancel| {
///         let name = ctx.tool_call.name.clone();
///         async move {
///             let block = name == "delete_everything";
///             Ok(block.then(|| BeforeToolCallResult { block, ..Default::default() }))
///         }
///     })
///     .prepare_next_turn(|turn, _cancel| {
///         let results = turn.tool_results.len();
///         async move {
///             println!("the last turn had {results} tool results");
///             Ok(None)
///         }
///     })
///     .on_payload(|payload, _model| {
///         let size = payload.to_string().len();
///         async move {
///             println!("sending {size} bytes");
///             None // keep the payload as it is
///         }
///     });
/// let agent = Agent::new(options);
/// agent.prompt("Hello").await.unwrap();
/// assert_eq!(agent.messages().len(), 2);
/// # });
/// ```
#[derive(Clone)]
pub struct AgentOptions {
    /// Initial state.
    pub initial_state: AgentInitialState,
    /// The provider entry point of every request.
    pub stream_fn: Arc<dyn StreamFn>,
    /// The hooks, handed to every run as they are.
    pub(crate) hooks: Hooks,
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
    /// Retry runs that fail with a transient provider error (off by default; see [`RetryPolicy`]).
    pub retry: Option<RetryPolicy>,
    /// What the runs' `tracing` spans record (default: no message content; docs/tracing.md).
    pub trace: pi_loop::TraceOptions,
    /// The lifetime usage totals the agent counts on from (a resumed session's; taken by
    /// [`Agent::new`](crate::Agent::new)).
    pub usage: UsageTotal,
    /// Options of particular APIs (pi-providers' `AnthropicOptions`, ...), per API or per
    /// model: every request carries them, and its adapter applies the entry of its own type for
    /// the agent's current model ([`ApiOptions`]).
    pub api_options: ApiOptions,
}

impl std::fmt::Debug for AgentOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentOptions")
            .field("initial_state", &self.initial_state)
            .field("hooks", &self.hooks)
            .field("steering_mode", &self.steering_mode)
            .field("follow_up_mode", &self.follow_up_mode)
            .field("session_id", &self.session_id)
            .field("transport", &self.transport)
            .field("tool_execution", &self.tool_execution)
            .field("retry", &self.retry)
            .field("trace", &self.trace)
            .finish_non_exhaustive()
    }
}

impl AgentOptions {
    /// Options with this stream function, an empty initial state and no hooks.
    pub fn new(stream_fn: Arc<dyn StreamFn>) -> Self {
        Self {
            initial_state: AgentInitialState::default(),
            stream_fn,
            hooks: Hooks::new(),
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            session_id: None,
            thinking_budgets: None,
            transport: Transport::Auto,
            max_retry_delay_ms: None,
            identity: None,
            tool_execution: ToolExecutionMode::Parallel,
            retry: None,
            trace: pi_loop::TraceOptions::default(),
            usage: UsageTotal::default(),
            api_options: ApiOptions::new(),
        }
    }

    /// The hooks.
    pub fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    /// Replace the hooks with `hooks`.
    pub fn with_hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks;
        self
    }

    fn map_hooks(mut self, set: impl FnOnce(Hooks) -> Hooks) -> Self {
        self.hooks = set(std::mem::take(&mut self.hooks));
        self
    }

    /// Set `convert_to_llm` ([`Hooks::convert_to_llm`]).
    pub fn convert_to_llm<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&[AgentMessage]) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Vec<Message>>> + Send + 'static,
    {
        self.map_hooks(|hooks| hooks.convert_to_llm(hook))
    }

    /// Set `transform_context` ([`Hooks::transform_context`]).
    pub fn transform_context<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&[AgentMessage], CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Vec<AgentMessage>>> + Send + 'static,
    {
        self.map_hooks(|hooks| hooks.transform_context(hook))
    }

    /// Set `get_api_key` ([`Hooks::get_api_key`]).
    pub fn get_api_key<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Option<String>>> + Send + 'static,
    {
        self.map_hooks(|hooks| hooks.get_api_key(hook))
    }

    /// Set `finish_turn` ([`Hooks::finish_turn`]).
    pub fn finish_turn<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&TurnContext<'_>, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Option<TurnDecision>>> + Send + 'static,
    {
        self.map_hooks(|hooks| hooks.finish_turn(hook))
    }

    /// Set `prepare_request` ([`Hooks::prepare_request`]).
    pub fn prepare_request<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&RequestContext<'_>, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Option<RequestUpdate>>> + Send + 'static,
    {
        self.map_hooks(|hooks| hooks.prepare_request(hook))
    }

    /// Set `prepare_next_turn` ([`Hooks::prepare_next_turn`]; the reference's
    /// `prepareNextTurnWithContext`, and its `prepareNextTurn` when the turn is not read). A
    /// run looks the hook up in the agent's options each time it prepares a turn.
    pub fn prepare_next_turn<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&TurnContext<'_>, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Option<TurnUpdate>>> + Send + 'static,
    {
        self.map_hooks(|hooks| hooks.prepare_next_turn(hook))
    }

    /// Set `before_tool_call` ([`Hooks::before_tool_call`]).
    pub fn before_tool_call<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&BeforeToolCallContext<'_>, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Option<BeforeToolCallResult>>> + Send + 'static,
    {
        self.map_hooks(|hooks| hooks.before_tool_call(hook))
    }

    /// Set `after_tool_call` ([`Hooks::after_tool_call`]).
    pub fn after_tool_call<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&AfterToolCallContext<'_>, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Option<AfterToolCallResult>>> + Send + 'static,
    {
        self.map_hooks(|hooks| hooks.after_tool_call(hook))
    }

    /// Set `on_payload` ([`Hooks::on_payload`]).
    pub fn on_payload<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&Value, &Model) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<Value>> + Send + 'static,
    {
        self.map_hooks(|hooks| hooks.on_payload(hook))
    }

    /// Set `on_response` ([`Hooks::on_response`]).
    pub fn on_response<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&ProviderResponse, &Model) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.map_hooks(|hooks| hooks.on_response(hook))
    }

    /// Set `on_provider_stream_event` ([`Hooks::on_provider_stream_event`]).
    pub fn on_provider_stream_event<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&Value, &Model) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.map_hooks(|hooks| hooks.on_provider_stream_event(hook))
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

    /// Count the agent's lifetime usage totals on from `usage` (a resumed session's).
    pub fn with_usage(mut self, usage: UsageTotal) -> Self {
        self.usage = usage;
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

    /// Retry runs that fail with a transient provider error ([`RetryPolicy`]).
    pub fn with_retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// Set the session id.
    pub fn with_session_id(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }
}
