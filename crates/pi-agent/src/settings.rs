//! What an agent keeps of its [`AgentOptions`] for its whole life.
//!
//! Every agent holds its options while it lives, and a process may run thousands of agents.
//! The options as given carry the initial state, which is used once, when the agent is built:
//! the agent keeps the rest. Their hooks are one pointer while none is set
//! ([`pi_loop::Hooks`]), and each run gets them as they are.

use std::sync::Arc;

use pi_loop::Hooks;
use pi_types::{ApiOptions, ClientIdentity, StreamFn, ThinkingBudgets};
use pi_types::{ToolExecutionMode, Transport};

use crate::options::{AgentInitialState, AgentOptions, QueueMode};
use crate::retry::RetryPolicy;
use crate::usage::UsageTotal;

/// [`AgentOptions`] without the initial state.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) stream_fn: Arc<dyn StreamFn>,
    pub(crate) hooks: Hooks,
    pub(crate) steering_mode: QueueMode,
    pub(crate) follow_up_mode: QueueMode,
    pub(crate) session_id: Option<String>,
    pub(crate) thinking_budgets: Option<Arc<ThinkingBudgets>>,
    pub(crate) transport: Transport,
    pub(crate) max_retry_delay_ms: Option<u64>,
    pub(crate) identity: Option<Arc<ClientIdentity>>,
    pub(crate) tool_execution: ToolExecutionMode,
    /// Boxed: most agents have none, and every agent keeps its settings.
    pub(crate) retry: Option<Arc<RetryPolicy>>,
    pub(crate) trace: pi_loop::TraceOptions,
    pub(crate) api_options: ApiOptions,
}

impl Settings {
    /// The settings of `options`; their initial state and usage are dropped (the agent was
    /// built from them).
    pub(crate) fn new(options: AgentOptions) -> Self {
        let AgentOptions {
            initial_state: _,
            stream_fn,
            hooks,
            steering_mode,
            follow_up_mode,
            session_id,
            thinking_budgets,
            transport,
            max_retry_delay_ms,
            identity,
            tool_execution,
            retry,
            trace,
            usage: _,
            api_options,
        } = options;
        Self {
            stream_fn,
            hooks,
            steering_mode,
            follow_up_mode,
            session_id,
            thinking_budgets,
            transport,
            max_retry_delay_ms,
            identity,
            tool_execution,
            retry: retry.map(Arc::new),
            trace,
            api_options,
        }
    }

    /// The options these settings came from, with an empty initial state and usage.
    pub(crate) fn to_options(&self) -> AgentOptions {
        AgentOptions {
            initial_state: AgentInitialState::default(),
            stream_fn: Arc::clone(&self.stream_fn),
            hooks: self.hooks.clone(),
            steering_mode: self.steering_mode,
            follow_up_mode: self.follow_up_mode,
            session_id: self.session_id.clone(),
            thinking_budgets: self.thinking_budgets.clone(),
            transport: self.transport,
            max_retry_delay_ms: self.max_retry_delay_ms,
            identity: self.identity.clone(),
            tool_execution: self.tool_execution,
            retry: self.retry.as_deref().cloned(),
            trace: self.trace,
            usage: UsageTotal::default(),
            api_options: self.api_options.clone(),
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
        assert!(settings.hooks.is_empty());
        // The options as given, for comparison: 360 bytes when this was written, with each
        // hook a field of its own.
        assert!(std::mem::size_of::<Settings>() <= 104, "Settings is {} bytes", std::mem::size_of::<Settings>());
    }

    #[test]
    fn gives_back_the_options_it_came_from() {
        let mut options =
            AgentOptions::new(Arc::new(never)).get_api_key(|_provider| async { Ok(Some("k".to_owned())) });
        options.session_id = Some("s-1".into());
        options.max_retry_delay_ms = Some(7);
        options.steering_mode = QueueMode::All;
        let settings = Settings::new(options);
        assert!(!settings.hooks.is_empty());
        let back = settings.to_options();
        assert_eq!(back.session_id.as_deref(), Some("s-1"));
        assert_eq!(back.max_retry_delay_ms, Some(7));
        assert_eq!(back.steering_mode, QueueMode::All);
        let hooks = back.hooks().fns();
        assert!(hooks.get_api_key.is_some() && hooks.before_tool_call.is_none());
    }
}
