//! What an agent keeps of its [`AgentOptions`] for its whole life.
//!
//! Every agent holds its options while it lives, and a process may run thousands of agents.
//! The options as given are mostly room for hooks that are rarely set (twelve of them, 16
//! bytes each) and the initial state, which is used once, when the agent is built. The agent
//! keeps them here instead: the hooks in one box, present only when one of them is set, and
//! no initial state (about 270 bytes less per agent).

use std::sync::Arc;

use pi_loop::{
    AfterToolCallFn, BeforeToolCallFn, ConvertToLlmFn, FinishTurnFn, GetApiKeyFn, PrepareRequestFn, TransformContextFn,
};
use pi_types::{ClientIdentity, OnPayload, OnProviderStreamEvent, OnResponse, StreamFn, ThinkingBudgets};
use pi_types::{ToolExecutionMode, Transport};

use crate::options::{AgentInitialState, AgentOptions, PrepareNextTurnFn, PrepareNextTurnWithContextFn, QueueMode};

/// [`AgentOptions`] without the initial state, the hooks boxed.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) stream_fn: Arc<dyn StreamFn>,
    /// `None` while no hook is set.
    pub(crate) hooks: Option<Box<Hooks>>,
    pub(crate) steering_mode: QueueMode,
    pub(crate) follow_up_mode: QueueMode,
    pub(crate) session_id: Option<String>,
    pub(crate) thinking_budgets: Option<Arc<ThinkingBudgets>>,
    pub(crate) transport: Transport,
    pub(crate) max_retry_delay_ms: Option<u64>,
    pub(crate) identity: Option<Arc<ClientIdentity>>,
    pub(crate) tool_execution: ToolExecutionMode,
}

/// The hooks of [`AgentOptions`], field for field.
#[derive(Clone, Default)]
pub(crate) struct Hooks {
    pub(crate) convert_to_llm: Option<ConvertToLlmFn>,
    pub(crate) transform_context: Option<TransformContextFn>,
    pub(crate) get_api_key: Option<GetApiKeyFn>,
    pub(crate) on_payload: Option<OnPayload>,
    pub(crate) on_response: Option<OnResponse>,
    pub(crate) on_provider_stream_event: Option<OnProviderStreamEvent>,
    pub(crate) before_tool_call: Option<BeforeToolCallFn>,
    pub(crate) after_tool_call: Option<AfterToolCallFn>,
    pub(crate) finish_turn: Option<FinishTurnFn>,
    pub(crate) prepare_request: Option<PrepareRequestFn>,
    pub(crate) prepare_next_turn: Option<PrepareNextTurnFn>,
    pub(crate) prepare_next_turn_with_context: Option<PrepareNextTurnWithContextFn>,
}

impl Hooks {
    fn any_set(&self) -> bool {
        let Self {
            convert_to_llm,
            transform_context,
            get_api_key,
            on_payload,
            on_response,
            on_provider_stream_event,
            before_tool_call,
            after_tool_call,
            finish_turn,
            prepare_request,
            prepare_next_turn,
            prepare_next_turn_with_context,
        } = self;
        convert_to_llm.is_some()
            || transform_context.is_some()
            || get_api_key.is_some()
            || on_payload.is_some()
            || on_response.is_some()
            || on_provider_stream_event.is_some()
            || before_tool_call.is_some()
            || after_tool_call.is_some()
            || finish_turn.is_some()
            || prepare_request.is_some()
            || prepare_next_turn.is_some()
            || prepare_next_turn_with_context.is_some()
    }
}

impl Settings {
    /// The settings of `options`; their initial state is dropped (the agent was built from it).
    pub(crate) fn new(options: AgentOptions) -> Self {
        let AgentOptions {
            initial_state: _,
            stream_fn,
            convert_to_llm,
            transform_context,
            get_api_key,
            on_payload,
            on_response,
            on_provider_stream_event,
            before_tool_call,
            after_tool_call,
            finish_turn,
            prepare_request,
            prepare_next_turn,
            prepare_next_turn_with_context,
            steering_mode,
            follow_up_mode,
            session_id,
            thinking_budgets,
            transport,
            max_retry_delay_ms,
            identity,
            tool_execution,
        } = options;
        let hooks = Hooks {
            convert_to_llm,
            transform_context,
            get_api_key,
            on_payload,
            on_response,
            on_provider_stream_event,
            before_tool_call,
            after_tool_call,
            finish_turn,
            prepare_request,
            prepare_next_turn,
            prepare_next_turn_with_context,
        };
        Self {
            stream_fn,
            hooks: hooks.any_set().then(|| Box::new(hooks)),
            steering_mode,
            follow_up_mode,
            session_id,
            thinking_budgets,
            transport,
            max_retry_delay_ms,
            identity,
            tool_execution,
        }
    }

    /// The hooks; all unset when none is.
    pub(crate) fn hooks(&self) -> Hooks {
        self.hooks.as_deref().cloned().unwrap_or_default()
    }

    /// The options these settings came from, with an empty initial state.
    pub(crate) fn to_options(&self) -> AgentOptions {
        let Hooks {
            convert_to_llm,
            transform_context,
            get_api_key,
            on_payload,
            on_response,
            on_provider_stream_event,
            before_tool_call,
            after_tool_call,
            finish_turn,
            prepare_request,
            prepare_next_turn,
            prepare_next_turn_with_context,
        } = self.hooks();
        AgentOptions {
            initial_state: AgentInitialState::default(),
            stream_fn: Arc::clone(&self.stream_fn),
            convert_to_llm,
            transform_context,
            get_api_key,
            on_payload,
            on_response,
            on_provider_stream_event,
            before_tool_call,
            after_tool_call,
            finish_turn,
            prepare_request,
            prepare_next_turn,
            prepare_next_turn_with_context,
            steering_mode: self.steering_mode,
            follow_up_mode: self.follow_up_mode,
            session_id: self.session_id.clone(),
            thinking_budgets: self.thinking_budgets.clone(),
            transport: self.transport,
            max_retry_delay_ms: self.max_retry_delay_ms,
            identity: self.identity.clone(),
            tool_execution: self.tool_execution,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(
        _model: &pi_types::Model,
        _context: pi_types::TranscriptContext,
        _options: pi_types::StreamOptions,
    ) -> pi_types::AssistantMessageEventStream {
        pi_types::AssistantMessageEventStream::from_events([])
    }

    #[test]
    fn keeps_no_room_for_unset_hooks() {
        let settings = Settings::new(AgentOptions::new(Arc::new(never)));
        assert!(settings.hooks.is_none());
        // The options as given, for comparison: 360 bytes when this was written.
        assert!(std::mem::size_of::<Settings>() <= 96, "Settings is {} bytes", std::mem::size_of::<Settings>());
    }

    #[test]
    fn gives_back_the_options_it_came_from() {
        let mut options = AgentOptions::new(Arc::new(never));
        options.session_id = Some("s-1".into());
        options.max_retry_delay_ms = Some(7);
        options.steering_mode = QueueMode::All;
        options.get_api_key = Some(Arc::new(|_provider| Box::pin(async { Ok(Some("k".to_owned())) })));
        let settings = Settings::new(options);
        assert!(settings.hooks.is_some());
        let back = settings.to_options();
        assert_eq!(back.session_id.as_deref(), Some("s-1"));
        assert_eq!(back.max_retry_delay_ms, Some(7));
        assert_eq!(back.steering_mode, QueueMode::All);
        assert!(back.get_api_key.is_some() && back.before_tool_call.is_none());
    }
}
