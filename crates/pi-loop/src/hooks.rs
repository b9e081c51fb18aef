//! The hooks of a run: one set ([`Hooks`]), given to a [`crate::LoopConfig`] or to an agent's
//! options, and the functions it holds as the loop calls them.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use pi_types::CancellationToken;
use pi_types::{
    AgentMessage, BoxError, Message, Model, OnPayload, OnProviderStreamEvent, OnResponse, ProviderResponse,
};
use serde_json::Value;

use crate::context::{
    AfterToolCallContext, AfterToolCallResult, BeforeToolCallContext, BeforeToolCallResult, RequestContext,
    RequestUpdate, TurnContext, TurnDecision, TurnUpdate,
};

/// Result of a hook: `Err` is a thrown error.
pub type HookResult<T> = Result<T, BoxError>;

/// `convert_to_llm` as the loop calls it (set with [`Hooks::convert_to_llm`]).
pub type ConvertToLlmFn = Arc<dyn Fn(&[AgentMessage]) -> BoxFuture<'static, HookResult<Vec<Message>>> + Send + Sync>;
/// `transform_context` as the loop calls it (set with [`Hooks::transform_context`]).
pub type TransformContextFn =
    Arc<dyn Fn(&[AgentMessage], &CancellationToken) -> BoxFuture<'static, HookResult<Vec<AgentMessage>>> + Send + Sync>;
/// `get_api_key` as the loop calls it: the key for a provider id (set with [`Hooks::get_api_key`]).
pub type GetApiKeyFn = Arc<dyn Fn(String) -> BoxFuture<'static, HookResult<Option<String>>> + Send + Sync>;
/// `finish_turn` as the loop calls it (set with [`Hooks::finish_turn`]).
pub type FinishTurnFn = Arc<
    dyn Fn(&TurnContext<'_>, &CancellationToken) -> BoxFuture<'static, HookResult<Option<TurnDecision>>> + Send + Sync,
>;
/// `prepare_request` as the loop calls it (set with [`Hooks::prepare_request`]).
pub type PrepareRequestFn = Arc<
    dyn Fn(&RequestContext<'_>, &CancellationToken) -> BoxFuture<'static, HookResult<Option<RequestUpdate>>>
        + Send
        + Sync,
>;
/// `prepare_next_turn` as the loop calls it (set with [`Hooks::prepare_next_turn`]).
pub type PrepareNextTurnFn = Arc<
    dyn Fn(&TurnContext<'_>, &CancellationToken) -> BoxFuture<'static, HookResult<Option<TurnUpdate>>> + Send + Sync,
>;
/// `before_tool_call` as the loop calls it (set with [`Hooks::before_tool_call`]).
pub type BeforeToolCallFn = Arc<
    dyn Fn(
            &BeforeToolCallContext<'_>,
            &CancellationToken,
        ) -> BoxFuture<'static, HookResult<Option<BeforeToolCallResult>>>
        + Send
        + Sync,
>;
/// `after_tool_call` as the loop calls it (set with [`Hooks::after_tool_call`]).
pub type AfterToolCallFn = Arc<
    dyn Fn(&AfterToolCallContext<'_>, &CancellationToken) -> BoxFuture<'static, HookResult<Option<AfterToolCallResult>>>
        + Send
        + Sync,
>;
/// `get_steering_messages` / `get_follow_up_messages` as the loop calls them (must not fail;
/// set with [`crate::LoopConfig::get_steering_messages`] and
/// [`crate::LoopConfig::get_follow_up_messages`]).
pub type MessageSourceFn = Arc<dyn Fn() -> BoxFuture<'static, Vec<AgentMessage>> + Send + Sync>;

/// The hooks of a run, set with the builder methods.
///
/// Hooks are async, may be closures, and cost nothing when unset. A hook that returns
/// `Err(e)` or panics is the reference's thrown error with message `e.to_string()` (or the
/// panic's text): inside tool handling it becomes an error tool result; elsewhere the run ends
/// with [`crate::LoopError::Hook`].
///
/// Each hook is set with a builder method taking an ordinary closure. Hooks that look at the
/// transcript get it borrowed (`&TurnContext<'_>`, `&[AgentMessage]`, ...), so nothing is
/// copied per call: the closure reads what it needs, then returns a future that owns its data
/// (`async move` over the values it took). Hooks that may wait get the run's cancellation
/// token, by value. A future that still borrows the context (`|ctx, _| async move { ctx... }`)
/// does not compile: rustc says "lifetime may not live long enough ... returning this value
/// requires that `'1` must outlive `'2`"; copy what the hook needs out of the context first, as
/// below.
///
/// ```
/// use pi_loop::{BeforeToolCallResult, Hooks, SetHooks, TurnDecision};
///
/// let hooks = Hooks::new()
///     .before_tool_call(|ctx, _cancel| {
///         let name = ctx.tool_call.name.clone();
///         async move {
///             let block = name == "rm";
///             Ok(block.then(|| BeforeToolCallResult { block, reason: Some("no".into()), ..Default::default() }))
///         }
///     })
///     .finish_turn(|turn, cancel| {
///         let calls = turn.tool_results.len();
///         async move { Ok((calls == 0 || cancel.is_cancelled()).then_some(TurnDecision::End)) }
///     })
///     .get_api_key(|provider| async move { Ok(std::env::var(format!("{provider}_KEY")).ok()) });
/// assert!(!hooks.is_empty() && hooks.fns().after_tool_call.is_none());
/// ```
///
/// Cloning shares the hooks. A set with no hook is one null pointer: every running agent holds
/// one, and most set none (`LoopConfig` and the agent's settings keep theirs inline for that).
#[derive(Clone, Default)]
pub struct Hooks {
    /// `None` while no hook is set.
    fns: Option<Arc<HookFns>>,
}

/// The functions of a [`Hooks`] as the loop calls them: read them with [`Hooks::fns`], set
/// them with the builders of [`Hooks`]. `None`: unset.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct HookFns {
    /// Transcript → provider messages; default keeps `system`, `user`, `assistant`, `toolResult`.
    pub convert_to_llm: Option<ConvertToLlmFn>,
    /// Transcript transform before `convert_to_llm` (pruning, injection).
    pub transform_context: Option<TransformContextFn>,
    /// Fresh API key per request.
    pub get_api_key: Option<GetApiKeyFn>,
    /// Decides after each turn, before `turn_end`.
    pub finish_turn: Option<FinishTurnFn>,
    /// Adjusts each request right before it is sent.
    pub prepare_request: Option<PrepareRequestFn>,
    /// Adjusts the next turn after `turn_end`.
    pub prepare_next_turn: Option<PrepareNextTurnFn>,
    /// Runs before each tool executes (after validation).
    pub before_tool_call: Option<BeforeToolCallFn>,
    /// Runs after each tool executed.
    pub after_tool_call: Option<AfterToolCallFn>,
    /// Sees (and may replace) each request's payload; forwarded to the stream function.
    pub on_payload: Option<OnPayload>,
    /// Sees each HTTP response's status and headers; forwarded to the stream function.
    pub on_response: Option<OnResponse>,
    /// Sees each raw provider stream event; forwarded to the stream function.
    pub on_provider_stream_event: Option<OnProviderStreamEvent>,
}

impl HookFns {
    const NONE: Self = Self {
        convert_to_llm: None,
        transform_context: None,
        get_api_key: None,
        finish_turn: None,
        prepare_request: None,
        prepare_next_turn: None,
        before_tool_call: None,
        after_tool_call: None,
        on_payload: None,
        on_response: None,
        on_provider_stream_event: None,
    };
}

static NO_HOOKS: HookFns = HookFns::NONE;

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let HookFns {
            convert_to_llm,
            transform_context,
            get_api_key,
            finish_turn,
            prepare_request,
            prepare_next_turn,
            before_tool_call,
            after_tool_call,
            on_payload,
            on_response,
            on_provider_stream_event,
        } = self.fns();
        let set = [
            ("convert_to_llm", convert_to_llm.is_some()),
            ("transform_context", transform_context.is_some()),
            ("get_api_key", get_api_key.is_some()),
            ("finish_turn", finish_turn.is_some()),
            ("prepare_request", prepare_request.is_some()),
            ("prepare_next_turn", prepare_next_turn.is_some()),
            ("before_tool_call", before_tool_call.is_some()),
            ("after_tool_call", after_tool_call.is_some()),
            ("on_payload", on_payload.is_some()),
            ("on_response", on_response.is_some()),
            ("on_provider_stream_event", on_provider_stream_event.is_some()),
        ];
        f.debug_set().entries(set.iter().filter(|(_, is_set)| *is_set).map(|(name, _)| name)).finish()
    }
}

impl Hooks {
    /// No hook set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no hook is set.
    pub fn is_empty(&self) -> bool {
        self.fns.is_none()
    }

    /// The hooks as the loop calls them; all `None` when none is set.
    pub fn fns(&self) -> &HookFns {
        self.fns.as_deref().unwrap_or(&NO_HOOKS)
    }
}

/// The hook setters, written once for every configuration that holds [`Hooks`]: `Hooks`
/// itself, [`LoopConfig`](crate::LoopConfig) and pi-agent's `AgentOptions`. A holder says only
/// how its hook functions are changed ([`SetHooks::set_hook`]); each setter replaces one hook.
///
/// ```
/// use pi_loop::{Hooks, SetHooks};
///
/// let hooks = Hooks::new().should_stop_after_turn(|turn| turn.message.stop_reason == pi_types::StopReason::Length);
/// assert!(hooks.fns().finish_turn.is_some());
/// ```
pub trait SetHooks: Sized {
    /// Change the holder's hook functions with `set`.
    fn set_hook(self, set: impl FnOnce(&mut HookFns)) -> Self;

    /// `convert_to_llm`: the transcript → the provider messages of a request (replaces the
    /// default, which keeps `system`, `user`, `assistant` and `toolResult` messages).
    fn convert_to_llm<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&[AgentMessage]) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Vec<Message>>> + Send + 'static,
    {
        let hook: ConvertToLlmFn = Arc::new(move |messages| Box::pin(hook(messages)));
        self.set_hook(|fns| fns.convert_to_llm = Some(hook))
    }

    /// `transform_context`: rewrites the transcript of each request before `convert_to_llm`
    /// (pruning, injection). Requests without it convert only their new messages.
    fn transform_context<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&[AgentMessage], CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Vec<AgentMessage>>> + Send + 'static,
    {
        let hook: TransformContextFn = Arc::new(move |messages, cancel| Box::pin(hook(messages, cancel.clone())));
        self.set_hook(|fns| fns.transform_context = Some(hook))
    }

    /// `get_api_key`: the key of each request for a provider id; an empty or absent key falls
    /// back to the configured one.
    fn get_api_key<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Option<String>>> + Send + 'static,
    {
        let hook: GetApiKeyFn = Arc::new(move |provider| Box::pin(hook(provider)));
        self.set_hook(|fns| fns.get_api_key = Some(hook))
    }

    /// `finish_turn`: decides after each turn, before `turn_end`, whether the run ends or
    /// makes one more request (`None`: as the loop would).
    fn finish_turn<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&TurnContext<'_>, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Option<TurnDecision>>> + Send + 'static,
    {
        let hook: FinishTurnFn = Arc::new(move |turn, cancel| Box::pin(hook(turn, cancel.clone())));
        self.set_hook(|fns| fns.finish_turn = Some(hook))
    }

    /// The older `shouldStopAfterTurn` hook: `true` ends the run after the turn. A thin
    /// convenience over [`SetHooks::finish_turn`] (it replaces any `finish_turn`).
    fn should_stop_after_turn<F>(self, should_stop: F) -> Self
    where
        F: Fn(&TurnContext<'_>) -> bool + Send + Sync + 'static,
    {
        self.finish_turn(move |turn, _cancel| std::future::ready(Ok(should_stop(turn).then_some(TurnDecision::End))))
    }

    /// `prepare_request`: may replace the context, model or thinking level right before each
    /// request.
    fn prepare_request<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&RequestContext<'_>, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Option<RequestUpdate>>> + Send + 'static,
    {
        let hook: PrepareRequestFn = Arc::new(move |request, cancel| Box::pin(hook(request, cancel.clone())));
        self.set_hook(|fns| fns.prepare_request = Some(hook))
    }

    /// `prepare_next_turn`: sees the completed turn at the start of the next one and may
    /// replace its context, model or thinking level, or add messages.
    fn prepare_next_turn<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&TurnContext<'_>, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Option<TurnUpdate>>> + Send + 'static,
    {
        let hook: PrepareNextTurnFn = Arc::new(move |turn, cancel| Box::pin(hook(turn, cancel.clone())));
        self.set_hook(|fns| fns.prepare_next_turn = Some(hook))
    }

    /// `before_tool_call`: runs before each tool executes (after validation) and may block it.
    fn before_tool_call<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&BeforeToolCallContext<'_>, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Option<BeforeToolCallResult>>> + Send + 'static,
    {
        let hook: BeforeToolCallFn = Arc::new(move |ctx, cancel| Box::pin(hook(ctx, cancel.clone())));
        self.set_hook(|fns| fns.before_tool_call = Some(hook))
    }

    /// `after_tool_call`: runs after each tool executed and may override its result field by
    /// field.
    fn after_tool_call<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&AfterToolCallContext<'_>, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<Option<AfterToolCallResult>>> + Send + 'static,
    {
        let hook: AfterToolCallFn = Arc::new(move |ctx, cancel| Box::pin(hook(ctx, cancel.clone())));
        self.set_hook(|fns| fns.after_tool_call = Some(hook))
    }

    /// `onPayload`: sees each request's provider payload and may replace it (`Some`). Given to
    /// the stream function with the request's options (over the options' own).
    fn on_payload<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&Value, &Model) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<Value>> + Send + 'static,
    {
        let hook: OnPayload = Arc::new(move |payload, model| Box::pin(hook(payload, model)));
        self.set_hook(|fns| fns.on_payload = Some(hook))
    }

    /// `onResponse`: sees each HTTP response's status and headers before its body is read.
    /// Given to the stream function with the request's options (over the options' own).
    fn on_response<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&ProviderResponse, &Model) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let hook: OnResponse = Arc::new(move |response, model| Box::pin(hook(response, model)));
        self.set_hook(|fns| fns.on_response = Some(hook))
    }

    /// `onProviderStreamEvent`: sees each raw provider stream event before normalization.
    /// Given to the stream function with the request's options (over the options' own).
    fn on_provider_stream_event<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(&Value, &Model) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let hook: OnProviderStreamEvent = Arc::new(move |event, model| Box::pin(hook(event, model)));
        self.set_hook(|fns| fns.on_provider_stream_event = Some(hook))
    }
}

impl SetHooks for Hooks {
    /// Set one function (copying the others when this set shares them).
    fn set_hook(mut self, set: impl FnOnce(&mut HookFns)) -> Self {
        set(Arc::make_mut(self.fns.get_or_insert_with(Arc::default)));
        self
    }
}

/// A message source from an ordinary closure.
pub(crate) fn message_source<F, Fut>(source: F) -> MessageSourceFn
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Vec<AgentMessage>> + Send + 'static,
{
    Arc::new(move || Box::pin(source()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_set_is_one_null_pointer() {
        assert_eq!(std::mem::size_of::<Hooks>(), std::mem::size_of::<usize>());
        let hooks = Hooks::new();
        assert!(hooks.is_empty() && hooks.fns().finish_turn.is_none());
        assert_eq!(format!("{hooks:?}"), "{}");
    }

    #[test]
    fn setting_a_hook_keeps_the_others_and_leaves_clones_alone() {
        let first = Hooks::new().get_api_key(|_| async { Ok(None) });
        let both = first.clone().should_stop_after_turn(|_| true);
        assert!(first.fns().finish_turn.is_none() && first.fns().get_api_key.is_some());
        assert!(both.fns().finish_turn.is_some() && both.fns().get_api_key.is_some());
        assert_eq!(format!("{both:?}"), r#"{"get_api_key", "finish_turn"}"#);
    }
}
