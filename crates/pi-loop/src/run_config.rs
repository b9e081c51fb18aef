//! What a run keeps of its [`LoopConfig`] until it ends.
//!
//! Every running agent holds its run's configuration, so its size is memory per agent. Most
//! runs set none of the hooks other than the two message sources (an `Agent` always sets
//! those), and each unset hook would still take 16 bytes: the others are kept in one box,
//! present only when one of them is set (about 120 bytes less per run).

use std::sync::Arc;

use pi_types::{Model, StreamFn, StreamOptions, ToolExecutionMode};

use crate::config::{
    AfterToolCallFn, BeforeToolCallFn, ConvertToLlmFn, FinishTurnFn, GetApiKeyFn, LoopConfig, MessageSourceFn,
    PrepareNextTurnFn, PrepareRequestFn, TransformContextFn,
};

/// A [`LoopConfig`] with its rarely set hooks boxed.
pub(crate) struct RunConfig {
    pub(crate) model: Arc<Model>,
    pub(crate) options: StreamOptions,
    pub(crate) stream_fn: Arc<dyn StreamFn>,
    pub(crate) get_steering_messages: Option<MessageSourceFn>,
    pub(crate) get_follow_up_messages: Option<MessageSourceFn>,
    pub(crate) tool_execution: ToolExecutionMode,
    pub(crate) transcript_cache: Option<crate::TranscriptCache>,
    /// `None` while none of them is set.
    hooks: Option<Box<RunHooks>>,
}

/// The hooks of a [`LoopConfig`] a run calls only when they are set.
pub(crate) struct RunHooks {
    pub(crate) convert_to_llm: Option<ConvertToLlmFn>,
    pub(crate) transform_context: Option<TransformContextFn>,
    pub(crate) get_api_key: Option<GetApiKeyFn>,
    pub(crate) finish_turn: Option<FinishTurnFn>,
    pub(crate) prepare_request: Option<PrepareRequestFn>,
    pub(crate) prepare_next_turn: Option<PrepareNextTurnFn>,
    pub(crate) before_tool_call: Option<BeforeToolCallFn>,
    pub(crate) after_tool_call: Option<AfterToolCallFn>,
}

impl RunHooks {
    const NONE: Self = Self {
        convert_to_llm: None,
        transform_context: None,
        get_api_key: None,
        finish_turn: None,
        prepare_request: None,
        prepare_next_turn: None,
        before_tool_call: None,
        after_tool_call: None,
    };

    fn any_set(&self) -> bool {
        let Self {
            convert_to_llm,
            transform_context,
            get_api_key,
            finish_turn,
            prepare_request,
            prepare_next_turn,
            before_tool_call,
            after_tool_call,
        } = self;
        convert_to_llm.is_some()
            || transform_context.is_some()
            || get_api_key.is_some()
            || finish_turn.is_some()
            || prepare_request.is_some()
            || prepare_next_turn.is_some()
            || before_tool_call.is_some()
            || after_tool_call.is_some()
    }
}

static NO_HOOKS: RunHooks = RunHooks::NONE;

impl RunConfig {
    /// The hooks; all unset when none is.
    pub(crate) fn hooks(&self) -> &RunHooks {
        self.hooks.as_deref().unwrap_or(&NO_HOOKS)
    }

    /// Whether requests use the default conversion, with no transform: the run then converts
    /// only the messages new since the last request.
    pub(crate) fn converts_by_default(&self) -> bool {
        let hooks = self.hooks();
        hooks.transform_context.is_none() && hooks.convert_to_llm.is_none()
    }
}

impl From<LoopConfig> for RunConfig {
    fn from(config: LoopConfig) -> Self {
        let LoopConfig {
            model,
            options,
            stream_fn,
            convert_to_llm,
            transform_context,
            get_api_key,
            finish_turn,
            prepare_request,
            prepare_next_turn,
            get_steering_messages,
            get_follow_up_messages,
            before_tool_call,
            after_tool_call,
            tool_execution,
            transcript_cache,
        } = config;
        let hooks = RunHooks {
            convert_to_llm,
            transform_context,
            get_api_key,
            finish_turn,
            prepare_request,
            prepare_next_turn,
            before_tool_call,
            after_tool_call,
        };
        Self {
            model,
            options,
            stream_fn,
            get_steering_messages,
            get_follow_up_messages,
            tool_execution,
            transcript_cache,
            hooks: hooks.any_set().then(|| Box::new(hooks)),
        }
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
        let config = RunConfig::from(LoopConfig::new(Model::new("m", "api", "p"), Arc::new(never)));
        assert!(config.hooks.is_none() && config.converts_by_default());
        // `LoopConfig` itself was 440 bytes when this was written; 320 before the options'
        // provider settings (`StreamOptions::env`, one pointer), 328 before their HTTP client
        // (`StreamOptions::http_client`, one pointer).
        let size = std::mem::size_of::<RunConfig>();
        assert!(size <= 336, "RunConfig is {size} bytes");
    }

    #[test]
    fn keeps_the_hooks_that_are_set() {
        let config =
            LoopConfig::new(Model::new("m", "api", "p"), Arc::new(never)).with_should_stop_after_turn(|_| true);
        let config = RunConfig::from(config);
        assert!(config.hooks().finish_turn.is_some() && config.hooks().get_api_key.is_none());
        assert!(config.converts_by_default());
    }
}
