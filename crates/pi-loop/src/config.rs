//! Configuration of a run: model, request options, stream function, message sources and
//! hooks.

use std::future::Future;
use std::sync::Arc;

use pi_types::{AgentMessage, Model, StreamFn, StreamOptions, ToolExecutionMode};

use crate::hooks::{message_source, HookFns, Hooks, MessageSourceFn, SetHooks};

/// Configuration of one run (the reference's `AgentLoopConfig`): built with [`LoopConfig::new`]
/// and the builder methods; its hooks with the setters of [`SetHooks`], which take ordinary
/// closures (see [`Hooks`] for how hooks see the run).
///
/// ```
/// use std::sync::Arc;
/// use pi_loop::{run_agent_loop, AgentContext, LoopConfig, NullSink, SetHooks, TurnUpdate};
/// use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider, FauxResponse};
/// use pi_types::{AgentMessage, StopReason, UserMessage};
///
/// let faux = FauxProvider::default();
/// faux.set_responses([FauxResponse::Message(faux_assistant_message(vec![faux_text("Hi!")], StopReason::Stop))]);
/// let config = LoopConfig::new(faux.model(), Arc::new(faux.clone()))
///     // Keep the last 20 messages of long conversations.
///     .transform_context(|messages, _cancel| {
///         let kept = messages[messages.len().saturating_sub(20)..].to_vec();
///         async move { Ok(kept) }
///     })
///     .get_api_key(|_provider| async { Ok(Some("key-from-a-vault".to_owned())) })
///     .get_follow_up_messages(|| async { Vec::new() });
/// let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// let messages = runtime.block_on(run_agent_loop(
///     vec![UserMessage::text("Hello").into()],
///     AgentContext::default(),
///     config,
///     Arc::new(NullSink),
///     Default::default(),
/// )).unwrap();
/// assert_eq!(messages.len(), 2);
/// ```
#[derive(Clone)]
pub struct LoopConfig {
    /// The model of the requests (shared: an agent's runs and their requests hold one copy).
    pub model: Arc<Model>,
    /// Request options: temperature, max tokens, reasoning, session id, API key, headers, ...
    /// (`cancel` is set by the loop; the request hooks of [`Hooks`] replace the options' own).
    pub options: StreamOptions,
    /// The provider entry point.
    pub stream_fn: Arc<dyn StreamFn>,
    /// Parallel (default) or sequential tool execution.
    pub tool_execution: ToolExecutionMode,
    /// Provider messages converted by earlier runs of the same growing transcript: a run then
    /// converts only its new messages (see [`crate::TranscriptCache`] for the contract).
    pub transcript_cache: Option<crate::TranscriptCache>,
    /// What the run's `tracing` spans record (default: attributes only, no message content;
    /// see [`crate::TraceOptions`] and docs/tracing.md).
    pub trace: crate::TraceOptions,
    /// Every running agent holds its run's configuration, and most set no hook: one pointer.
    hooks: Hooks,
    /// Messages typed while the agent works (an agent always sets both sources, so they are
    /// kept apart from the hooks).
    pub(crate) get_steering_messages: Option<MessageSourceFn>,
    /// Messages to handle when the agent would stop.
    pub(crate) get_follow_up_messages: Option<MessageSourceFn>,
}

impl std::fmt::Debug for LoopConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopConfig")
            .field("model", &self.model.id)
            .field("options", &self.options)
            .field("tool_execution", &self.tool_execution)
            .field("trace", &self.trace)
            .field("hooks", &self.hooks)
            .field("get_steering_messages", &self.get_steering_messages.is_some())
            .field("get_follow_up_messages", &self.get_follow_up_messages.is_some())
            .finish_non_exhaustive()
    }
}

impl LoopConfig {
    /// A configuration with default options, no message source and no hooks.
    pub fn new(model: impl Into<Arc<Model>>, stream_fn: Arc<dyn StreamFn>) -> Self {
        Self {
            model: model.into(),
            options: StreamOptions::default(),
            stream_fn,
            tool_execution: ToolExecutionMode::Parallel,
            transcript_cache: None,
            trace: crate::TraceOptions::default(),
            hooks: Hooks::new(),
            get_steering_messages: None,
            get_follow_up_messages: None,
        }
    }

    /// The hooks as the run calls them.
    pub(crate) fn hooks(&self) -> &HookFns {
        self.hooks.fns()
    }

    /// Whether requests use the default conversion, with no transform: the run then converts
    /// only the messages new since the last request.
    pub(crate) fn converts_by_default(&self) -> bool {
        let hooks = self.hooks();
        hooks.transform_context.is_none() && hooks.convert_to_llm.is_none()
    }

    /// Replace the hooks with `hooks` (an agent hands its own over this way).
    pub fn with_hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks;
        self
    }

    /// `getSteeringMessages`: messages typed while the agent works, polled at each turn
    /// boundary (must not fail).
    pub fn get_steering_messages<F, Fut>(mut self, source: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<AgentMessage>> + Send + 'static,
    {
        self.get_steering_messages = Some(message_source(source));
        self
    }

    /// `getFollowUpMessages`: messages to handle when the agent would stop (must not fail).
    pub fn get_follow_up_messages<F, Fut>(mut self, source: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<AgentMessage>> + Send + 'static,
    {
        self.get_follow_up_messages = Some(message_source(source));
        self
    }
}

impl SetHooks for LoopConfig {
    fn set_hook(mut self, set: impl FnOnce(&mut HookFns)) -> Self {
        self.hooks = std::mem::take(&mut self.hooks).set_hook(set);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(
        _model: &Model,
        _context: pi_types::TranscriptContext,
        _options: StreamOptions,
    ) -> pi_types::AssistantMessageEventStream {
        pi_types::AssistantMessageEventStream::from_events([])
    }

    #[test]
    fn keeps_no_room_for_unset_hooks() {
        let config = LoopConfig::new(Model::new("m").with_api("api").with_provider("p"), Arc::new(never));
        assert!(config.hooks.is_empty() && config.converts_by_default());
        // Every running agent holds its run's configuration. With each hook a field of its
        // own it was 440 bytes; 320 with the rarely set ones boxed, before the options'
        // provider settings (`StreamOptions::env`, `http_client` and `api_options`, one pointer
        // each) and the request settings of pi-ai 1.6.1 (`deferred`, `disable_continuation`,
        // `websocket_connect_timeout_ms`).
        let size = std::mem::size_of::<LoopConfig>();
        assert!(size <= 360, "LoopConfig is {size} bytes");
    }

    #[test]
    fn keeps_the_hooks_that_are_set() {
        let config = LoopConfig::new(Model::new("m").with_api("api").with_provider("p"), Arc::new(never))
            .should_stop_after_turn(|_| true)
            .get_steering_messages(|| async { Vec::new() });
        assert!(config.hooks().finish_turn.is_some() && config.hooks().get_api_key.is_none());
        assert!(config.converts_by_default() && config.get_steering_messages.is_some());
        assert!(!config.clone().convert_to_llm(|_| async { Ok(Vec::new()) }).converts_by_default());
    }
}
