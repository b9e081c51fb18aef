//! The two-level loop: steering inside, follow-ups outside.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use pi_types::transcript::{current_tool_declarations, normalize_context, tool_state_changes, ToolStateChanges};
use pi_types::CancellationToken;
use pi_types::{
    catch_call, AgentEvent, AgentMessage, AssistantMessage, AssistantMessageEvent, AssistantMessageEventStream,
    ClientIdentity, Context, Message, StopReason, SystemContent, SystemMessage, ThinkingLevel, Tool, TranscriptContext,
};

use crate::config::LoopConfig;
use crate::context::{AgentContext, RequestContext, RequestUpdate, TurnContext, TurnDecision, TurnUpdate};
use crate::sink::{AgentEventSink, Emitter, EventTarget};
use crate::tools::{execute_tool_calls, fail_truncated_tool_calls};
use crate::trace::RunTrace;
use crate::LoopError;

/// The loop's large inputs, moved to the heap once per run (see docs/architecture.md, "Futures
/// every run holds"): held by value, they would make every running agent's future kilobytes
/// larger.
struct Inputs {
    context: AgentContext,
    config: LoopConfig,
    prompts: Vec<AgentMessage>,
    target: EventTarget,
    cancel: CancellationToken,
}

impl Inputs {
    /// All of a run's inputs in one box: the run's future then holds one pointer to them
    /// until they are taken apart (each argument of its own would keep its place for the whole
    /// run, moved out or not).
    fn boxed(
        prompts: Vec<AgentMessage>,
        context: AgentContext,
        config: LoopConfig,
        target: EventTarget,
        cancel: CancellationToken,
    ) -> Box<Self> {
        Box::new(Self { context, config, prompts, target, cancel })
    }

    /// Moves the inputs out and frees their box now (moving out of `*box` in an `async fn`
    /// would keep the empty box allocated until the run ends).
    fn into_parts(self: Box<Self>) -> (AgentContext, LoopConfig, Vec<AgentMessage>, EventTarget, CancellationToken) {
        let Self { context, config, prompts, target, cancel } = *self;
        (context, config, prompts, target, cancel)
    }
}

type RunOutcome = Result<Vec<AgentMessage>, LoopError>;

/// Run a new prompt: the prompts enter the transcript (after any tool-declaration system
/// message) and the loop runs until the agent stops. Returns the messages the run added.
pub fn run_agent_loop(
    prompts: Vec<AgentMessage>,
    context: AgentContext,
    config: LoopConfig,
    sink: Arc<dyn AgentEventSink>,
    cancel: CancellationToken,
) -> impl Future<Output = RunOutcome> + Send + 'static {
    run_to(prompts, context, config, EventTarget::Sink(sink), cancel)
}

/// [`run_agent_loop`] into either kind of target (the `Stream` form's slot included).
pub(crate) fn run_to(
    prompts: Vec<AgentMessage>,
    context: AgentContext,
    config: LoopConfig,
    target: EventTarget,
    cancel: CancellationToken,
) -> impl Future<Output = RunOutcome> + Send + 'static {
    run_with_prompts(Inputs::boxed(prompts, context, config, target, cancel))
}

/// Continue from the current transcript without a new message (retries, or after tool
/// results). Refuses an empty transcript and one that ends with an assistant message.
pub fn run_agent_loop_continue(
    context: AgentContext,
    config: LoopConfig,
    sink: Arc<dyn AgentEventSink>,
    cancel: CancellationToken,
) -> impl Future<Output = RunOutcome> + Send + 'static {
    run_continue_to(context, config, EventTarget::Sink(sink), cancel)
}

/// [`run_agent_loop_continue`] into either kind of target.
pub(crate) fn run_continue_to(
    context: AgentContext,
    config: LoopConfig,
    target: EventTarget,
    cancel: CancellationToken,
) -> impl Future<Output = RunOutcome> + Send + 'static {
    run_continue(Inputs::boxed(Vec::new(), context, config, target, cancel))
}

#[allow(clippy::manual_async_fn)] // see docs/architecture.md, "Futures every run holds"
fn run_continue(inputs: Box<Inputs>) -> impl Future<Output = RunOutcome> + Send + 'static {
    async move {
        check_continue(&inputs.context)?;
        // Everything the run keeps is in its box: this future holds only the box.
        let mut run = {
            let (context, config, _, target, cancel) = inputs.into_parts();
            Box::new(Run::new(context, config, cancel, Emitter::new(target), Vec::new()))
        };
        // Each failure is recorded on the run's span as it ends the run (a block around these
        // steps would take room in every run's future).
        run.emitter.emit_boxed(AgentEvent::AgentStart).await.map_err(|e| run.trace.fail(e))?;
        run.emitter.emit_boxed(AgentEvent::TurnStart).await.map_err(|e| run.trace.fail(e))?;
        run.run().await.map_err(|e| run.trace.fail(e))?;
        run.trace.end(None);
        Ok(run.into_new_messages())
    }
}

#[allow(clippy::manual_async_fn)] // see docs/architecture.md, "Futures every run holds"
fn run_with_prompts(inputs: Box<Inputs>) -> impl Future<Output = RunOutcome> + Send + 'static {
    async move {
        // Built before the first await, in a block: the context and configuration then live only
        // in the run's box (a local moved from still has its place in the future until its scope
        // ends), and everything the run keeps is in that box, so this future holds only the box.
        let mut run = {
            let (mut context, config, prompts, target, cancel) = inputs.into_parts();
            let initial = declare_tool_changes(&context, prompts);
            context.messages.extend(initial.iter().cloned());
            Box::new(Run::new(context, config, cancel, Emitter::new(target), initial))
        };
        run.emitter.emit_boxed(AgentEvent::AgentStart).await.map_err(|e| run.trace.fail(e))?;
        run.emitter.emit_boxed(AgentEvent::TurnStart).await.map_err(|e| run.trace.fail(e))?;
        // The prompts are the run's first new messages.
        Box::pin(run.emit_new_messages(0)).await.map_err(|e| run.trace.fail(e))?;
        run.run().await.map_err(|e| run.trace.fail(e))?;
        run.trace.end(None);
        Ok(run.into_new_messages())
    }
}

pub(crate) fn check_continue(context: &AgentContext) -> Result<(), LoopError> {
    match context.messages.last() {
        None => Err(LoopError::NoMessages),
        Some(AgentMessage::Assistant(_)) => Err(LoopError::ContinueFromAssistant),
        Some(_) => Ok(()),
    }
}

struct Run {
    context: AgentContext,
    llm_cache: Arc<Vec<Message>>,
    llm_converted: usize,
    /// Where `llm_cache` came from and goes back to when the run ends (see `TranscriptCache`).
    shared_cache: Option<crate::TranscriptCache>,
    config: LoopConfig,
    cancel: CancellationToken,
    emitter: Emitter,
    /// The messages this run added, returned when it ends.
    new_messages: NewMessages,
    /// The run's `invoke_agent` span (see `crate::trace`).
    trace: RunTrace,
}

/// The messages a run added, in order.
///
/// They are the tail of the run's transcript, so while nothing needs them as a list of their
/// own the run keeps only where that tail starts: every running agent would otherwise hold a
/// second list of its run's messages. They become a list of their own when a hook reads them as
/// a slice (`finish_turn`, `prepare_next_turn`: known when the run starts) and when a hook
/// replaces the transcript (the tail then no longer holds them).
enum NewMessages {
    /// `context.messages` from `start` on.
    Tail {
        start: usize,
    },
    Own(Vec<AgentMessage>),
}

struct CompletedTurn {
    message: Arc<AssistantMessage>,
    tool_results: Vec<pi_types::ToolResultMessage>,
}

impl Run {
    fn new(
        context: AgentContext,
        config: LoopConfig,
        cancel: CancellationToken,
        emitter: Emitter,
        new_messages: Vec<AgentMessage>,
    ) -> Self {
        let hooks = config.hooks();
        // The caller put `new_messages` at the end of `context` already.
        let new_messages = match hooks.finish_turn.is_some() || hooks.prepare_next_turn.is_some() {
            true => NewMessages::Own(new_messages),
            false => NewMessages::Tail { start: context.messages.len().saturating_sub(new_messages.len()) },
        };
        let trace = RunTrace::new(&config);
        let mut run = Self {
            trace,
            context,
            llm_cache: Arc::default(),
            llm_converted: 0,
            shared_cache: None,
            config,
            cancel,
            emitter,
            new_messages,
        };
        if run.config.converts_by_default() {
            if let Some(cache) = run.config.transcript_cache.clone() {
                if let Some(converted) = cache.take().filter(|c| c.sources <= run.context.messages.len()) {
                    run.llm_cache = converted.messages;
                    run.llm_converted = converted.sources;
                }
                run.shared_cache = Some(cache);
            }
        }
        run
    }

    /// Give the conversion back to the shared cache; this run no longer uses it.
    fn return_cache(&mut self) {
        if let Some(cache) = self.shared_cache.take() {
            let messages = std::mem::take(&mut self.llm_cache);
            cache.put(crate::transcript_cache::Converted { messages, sources: self.llm_converted });
        }
    }

    async fn poll_steering(&self) -> Vec<AgentMessage> {
        match &self.config.get_steering_messages {
            Some(source) => source().await,
            None => Vec::new(),
        }
    }

    async fn poll_follow_ups(&self) -> Vec<AgentMessage> {
        match &self.config.get_follow_up_messages {
            Some(source) => source().await,
            None => Vec::new(),
        }
    }

    fn turn_context<'a>(&'a self, turn: &'a CompletedTurn) -> TurnContext<'a> {
        TurnContext {
            message: &turn.message,
            tool_results: &turn.tool_results,
            context: &self.context,
            // A run whose hooks take a `TurnContext` keeps its new messages as a list.
            new_messages: match &self.new_messages {
                NewMessages::Own(messages) => messages,
                NewMessages::Tail { .. } => &[],
            },
        }
    }

    /// The `prepare_next_turn` hook's answer for the turn after `turn`.
    async fn prepare_next_turn(&self, turn: &CompletedTurn) -> Result<Option<TurnUpdate>, LoopError> {
        let Some(hook) = self.config.hooks().prepare_next_turn.clone() else { return Ok(None) };
        let ctx = self.turn_context(turn);
        catch_call(|| hook(&ctx, &self.cancel)).await.map_err(LoopError::Hook)
    }

    /// The `prepare_request` hook's answer for the next request.
    async fn prepare_request(&self) -> Result<Option<RequestUpdate>, LoopError> {
        let Some(hook) = self.config.hooks().prepare_request.clone() else { return Ok(None) };
        let thinking_level = self.config.options.reasoning.unwrap_or(ThinkingLevel::Off);
        let request = RequestContext { context: &self.context, model: &self.config.model, thinking_level };
        catch_call(|| hook(&request, &self.cancel)).await.map_err(LoopError::Hook)
    }

    /// The `finish_turn` hook's decision on `turn`.
    async fn finish_turn(&self, turn: &CompletedTurn) -> Result<Option<TurnDecision>, LoopError> {
        let Some(hook) = self.config.hooks().finish_turn.clone() else { return Ok(None) };
        let ctx = self.turn_context(turn);
        catch_call(|| hook(&ctx, &self.cancel)).await.map_err(LoopError::Hook)
    }

    /// The messages this run added (the run ends here).
    fn into_new_messages(mut self: Box<Self>) -> Vec<AgentMessage> {
        match &mut self.new_messages {
            NewMessages::Own(messages) => std::mem::take(messages),
            NewMessages::Tail { .. } => self.new_messages_from(0),
        }
    }

    /// How many messages this run added.
    fn new_message_count(&self) -> usize {
        match &self.new_messages {
            NewMessages::Tail { start } => self.context.messages.len().saturating_sub(*start),
            NewMessages::Own(messages) => messages.len(),
        }
    }

    /// The messages this run added, from the `from`-th on.
    fn new_messages_from(&self, from: usize) -> Vec<AgentMessage> {
        match &self.new_messages {
            NewMessages::Tail { start } => {
                self.context.messages.iter_from(start.saturating_add(from)).cloned().collect()
            }
            NewMessages::Own(messages) => messages.get(from..).unwrap_or_default().to_vec(),
        }
    }

    /// Records a message this run added after it was appended to the transcript.
    fn note_new(&mut self, message: AgentMessage) {
        if let NewMessages::Own(messages) = &mut self.new_messages {
            messages.push(message);
        }
    }

    /// `message_start` and `message_end` of each new message from `from` on.
    async fn emit_new_messages(&self, from: usize) -> Result<(), LoopError> {
        for message in self.new_messages_from(from) {
            self.emitter.emit_boxed(AgentEvent::MessageStart { message: message.clone() }).await?;
            self.emitter.emit_boxed(AgentEvent::MessageEnd { message }).await?;
        }
        Ok(())
    }

    fn set_reasoning(&mut self, level: Option<ThinkingLevel>) {
        if let Some(level) = level {
            self.config.options.reasoning = (level != ThinkingLevel::Off).then_some(level);
        }
    }

    // Every running agent holds this future: what lives across its awaits is kept small (a
    // turn's own values are scoped to the block that uses them, the completed turn is built
    // in place in `last_turn`, and the larger phases run in boxed futures of their own).
    async fn run(&mut self) -> Result<(), LoopError> {
        let mut last_turn: Option<CompletedTurn> = None;
        let mut explicit_continuation = false;
        let mut pending = self.poll_steering().await;
        loop {
            let mut has_more_tool_calls = true;
            while has_more_tool_calls || !pending.is_empty() {
                {
                    let mut prepared = Vec::new();
                    if let Some(turn) = &last_turn {
                        if self.config.hooks().prepare_next_turn.is_some() {
                            // Boxed, as are the turn's other hook calls: inline, a hook's call
                            // (and the context it is given) would size the future of every run.
                            let update = Box::pin(self.prepare_next_turn(turn)).await?;
                            if let Some(update) = update {
                                if let Some(context) = update.context {
                                    self.replace_context(context);
                                }
                                prepared = update.messages.unwrap_or_default();
                                if let Some(model) = update.model {
                                    self.config.model = Arc::new(model);
                                }
                                self.set_reasoning(update.thinking_level);
                            }
                        }
                        // Preparation may take long: pick up steering queued meanwhile, but only
                        // when the earlier poll was empty (one-at-a-time queues would give two).
                        if pending.is_empty() {
                            pending = self.poll_steering().await;
                        }
                        self.emitter.emit_boxed(AgentEvent::TurnStart).await?;
                    }
                    prepared.append(&mut pending);
                    let from = self.new_message_count();
                    for message in declare_tool_changes(&self.context, prepared) {
                        self.context.messages.push(message.clone());
                        self.note_new(message);
                    }
                    if self.new_message_count() > from {
                        // Boxed: its loop's state would otherwise take room in every run's future.
                        Box::pin(self.emit_new_messages(from)).await?;
                    }
                }
                if self.config.hooks().prepare_request.is_some() {
                    let update = Box::pin(self.prepare_request()).await?;
                    if let Some(update) = update {
                        if let Some(context) = update.context {
                            self.replace_context(context);
                        }
                        if let Some(model) = update.model {
                            self.config.model = Arc::new(model);
                        }
                        self.set_reasoning(update.thinking_level);
                    }
                }

                // Boxed: the two big phases of a turn need not both live in every run's future.
                let message = Box::pin(self.stream_assistant_response()).await?;
                self.note_new(AgentMessage::Assistant(Arc::clone(&message)));
                let failed = matches!(message.stop_reason, StopReason::Error | StopReason::Aborted);
                let turn = last_turn.insert(CompletedTurn { message, tool_results: Vec::new() });
                if failed {
                    if self.config.hooks().finish_turn.is_some() {
                        Box::pin(self.finish_turn(turn)).await?;
                    }
                    let message = AgentMessage::Assistant(Arc::clone(&turn.message));
                    self.emitter.emit_boxed(AgentEvent::TurnEnd { message, tool_results: Vec::new() }).await?;
                    self.emitter.emit_boxed(AgentEvent::AgentEnd { messages: self.new_messages_from(0) }).await?;
                    return Ok(());
                }

                has_more_tool_calls = false;
                if turn.message.tool_calls().next().is_some() {
                    let batch = Box::pin(self.execute_tools(&turn.message)).await?;
                    has_more_tool_calls = !batch.terminate;
                    for result in &batch.messages {
                        let result = AgentMessage::ToolResult(Arc::clone(result));
                        self.context.messages.push(result.clone());
                        self.note_new(result);
                    }
                    // The turn's hooks and `turn_end` take the results by value.
                    turn.tool_results = batch.messages.iter().map(|result| (**result).clone()).collect();
                }

                let decision = match self.config.hooks().finish_turn.is_some() {
                    true => Box::pin(self.finish_turn(turn)).await?,
                    false => None,
                };
                // Only `prepare_next_turn` reads the last turn's results: without it, the event
                // takes them and nothing keeps them through the next request.
                let tool_results = match self.config.hooks().prepare_next_turn.is_some() {
                    true => turn.tool_results.clone(),
                    false => std::mem::take(&mut turn.tool_results),
                };
                let message = AgentMessage::Assistant(Arc::clone(&turn.message));
                self.emitter.emit_boxed(AgentEvent::TurnEnd { message, tool_results }).await?;
                if decision == Some(TurnDecision::End) {
                    self.emitter.emit_boxed(AgentEvent::AgentEnd { messages: self.new_messages_from(0) }).await?;
                    return Ok(());
                }
                explicit_continuation = decision == Some(TurnDecision::Continue);
                pending = self.poll_steering().await;
                if has_more_tool_calls || !pending.is_empty() {
                    explicit_continuation = false;
                }
            }
            let follow_ups = self.poll_follow_ups().await;
            if !follow_ups.is_empty() {
                explicit_continuation = false;
                pending = follow_ups;
                continue;
            }
            if explicit_continuation {
                // Nothing else scheduled a request: honour `continue` with one context-only turn.
                explicit_continuation = false;
                continue;
            }
            break;
        }
        self.emitter.emit_boxed(AgentEvent::AgentEnd { messages: self.new_messages_from(0) }).await
    }

    /// The tool calls of `message`: executed, or failed when the response was cut off.
    async fn execute_tools(&self, message: &Arc<AssistantMessage>) -> Result<crate::tools::ToolBatch, LoopError> {
        let trace =
            crate::tools::ToolTrace { parent: self.trace.span(), record_content: self.config.trace.record_content };
        if message.stop_reason == StopReason::Length {
            // Boxed: rare, and inline it would size every tool batch's future.
            return Box::pin(fail_truncated_tool_calls(message, &self.emitter, trace)).await;
        }
        let hooks = self.config.hooks();
        execute_tool_calls(
            &self.context,
            message,
            self.config.tool_execution,
            hooks,
            &self.cancel,
            &self.emitter,
            trace,
        )
        .await
    }

    /// The provider transcript, when the default `convert_to_llm` and no `transform_context`
    /// make it: the converted list is kept between requests and only the new messages are
    /// converted, so a request costs time in what changed, not in the history (when a hook
    /// makes it: [`Self::hooked_transcript`]).
    fn cached_transcript(&mut self) -> TranscriptContext {
        if self.llm_converted > self.context.messages.len() {
            self.reset_llm_cache();
        }
        let messages = &self.context.messages;
        let cache = Arc::make_mut(&mut self.llm_cache);
        cache.extend(messages.iter_from(self.llm_converted).filter_map(AgentMessage::to_llm));
        self.llm_converted = messages.len();
        TranscriptContext::from_shared(Arc::clone(&self.llm_cache))
    }

    /// The transcript and the key of a request when a hook takes part in making them, in the
    /// reference's order: `transform_context`, `convert_to_llm`, then `get_api_key`.
    async fn hooked_request_inputs(&mut self) -> Result<(TranscriptContext, Option<String>), LoopError> {
        let transcript = match self.config.converts_by_default() {
            true => self.cached_transcript(),
            false => self.hooked_transcript().await?,
        };
        Ok((transcript, self.api_key().await?))
    }

    /// The provider transcript through the `transform_context` and `convert_to_llm` hooks.
    async fn hooked_transcript(&self) -> Result<TranscriptContext, LoopError> {
        // The hooks see the transcript as a slice: a copy of the pointers, once per request.
        let history = self.context.messages.to_vec();
        let messages = match &self.config.hooks().transform_context {
            Some(hook) => catch_call(|| hook(&history, &self.cancel)).await.map_err(LoopError::Hook)?,
            None => history,
        };
        let messages: &[AgentMessage] = &messages;
        let messages = match &self.config.hooks().convert_to_llm {
            Some(hook) => catch_call(|| hook(messages)).await.map_err(LoopError::Hook)?,
            None => pi_types::default_convert_to_llm(messages),
        };
        Ok(normalize_context(Context { messages, ..Default::default() }))
    }

    /// The key from the `get_api_key` hook; `None` when it gives none or an empty one.
    async fn api_key(&self) -> Result<Option<String>, LoopError> {
        let Some(hook) = &self.config.hooks().get_api_key else { return Ok(None) };
        let provider = self.config.model.provider.to_string();
        // JavaScript `||`: an empty key falls back to the configured one.
        Ok(catch_call(|| hook(provider)).await.map_err(LoopError::Hook)?.filter(|k| !k.is_empty()))
    }

    /// The context was replaced by a hook: convert it from scratch next time.
    fn reset_llm_cache(&mut self) {
        self.llm_cache = Arc::new(Vec::new());
        self.llm_converted = 0;
    }

    fn replace_context(&mut self, context: AgentContext) {
        // The new transcript need not end with this run's messages: keep them apart from now on.
        if let NewMessages::Tail { .. } = self.new_messages {
            self.new_messages = NewMessages::Own(self.new_messages_from(0));
        }
        // The conversion so far still matches the transcript the cache belongs to.
        self.return_cache();
        self.context = context;
        self.reset_llm_cache();
    }

    async fn stream_assistant_response(&mut self) -> Result<Arc<AssistantMessage>, LoopError> {
        // The hooks' paths are boxed: inline, their futures would size this one (which every
        // streaming run holds) for all runs, hooks or not.
        // Only the transcript and the key are awaited here; the request's options are built
        // after them, so they never sit in this future.
        let (transcript, api_key) = match self.config.converts_by_default() && self.config.hooks().get_api_key.is_none()
        {
            true => (self.cached_transcript(), None),
            false => Box::pin(self.hooked_request_inputs()).await?,
        };
        let thinking_level = self.config.options.reasoning.unwrap_or(ThinkingLevel::Off);
        let chat = self.trace.chat_span(&self.config, transcript.messages());
        // In the span while the provider starts the request, so that what it traces (the HTTP
        // request at its seam) is the response's.
        let mut stream = crate::trace::in_scope(chat.as_deref(), || self.start_request(transcript, api_key));

        // Keep no reference, not even a weak one, to the provider's partial between events: the
        // provider mutates it in place (`Arc::make_mut`) only while nobody else holds it.
        // Only `start`, `done` and `error` come out of the stream: from the first `start` on, its
        // block events are delivered from inside the provider (see `crate::push`).
        let mut was_started = false;
        let mut push: Option<Arc<crate::push::PushDelivery>> = None;
        loop {
            // Made in a block that ends before the emit: a binding of the provider's event
            // that lived on would keep its place in this future beside the emission. The
            // emits of this function are on the heap: every concurrent request waits in this
            // future, which would otherwise keep room for one.
            let emitting = {
                // Until the response starts (the request phase: connecting, retries), the
                // stream is polled in the response's span; from `start` on it is polled as it
                // is, so the deltas pay nothing for tracing.
                let next = match was_started {
                    true => stream.next().await,
                    false => crate::trace::InSpan::new(chat.as_deref(), stream.next()).await,
                };
                // A pushed update's failure ends the run before anything after it is handled.
                if let Some(push) = &push {
                    push.take_failure()?;
                }
                match next {
                    None | Some(AssistantMessageEvent::Done { .. } | AssistantMessageEvent::Error { .. }) => break,
                    Some(AssistantMessageEvent::Start { partial }) => {
                        was_started = true;
                        let message = AgentMessage::Assistant(Arc::new((*partial).clone()));
                        self.emitter.emit_boxed(AgentEvent::MessageStart { message })
                    }
                    // Before `start` (and for a stream that refuses a consumer): not an update.
                    Some(_) => continue,
                }
            };
            emitting.await?;
            if push.is_none() {
                let delivery = Arc::new(crate::push::PushDelivery::new(self.emitter.clone()));
                if stream.push_to(delivery.clone()) {
                    push = Some(delivery);
                }
            }
        }
        // Without a terminal event, end with what was streamed. Taking the final message out of
        // the stream avoids copying it when nobody shares it.
        let message = self.finished(stream, was_started, thinking_level);
        self.trace.end_chat(chat.as_deref(), &message, self.config.trace.record_content);
        drop(chat);
        if !was_started {
            let start = AgentMessage::Assistant(Arc::new((*message).clone()));
            self.emitter.emit_boxed(AgentEvent::MessageStart { message: start }).await?;
        }
        self.context.messages.push(AgentMessage::Assistant(Arc::clone(&message)));
        self.emitter
            .emit_boxed(AgentEvent::MessageEnd { message: AgentMessage::Assistant(Arc::clone(&message)) })
            .await?;
        Ok(message)
    }

    /// The response's one shared message (for the transcript, the event and the turn), once its
    /// stream ended.
    fn finished(
        &self,
        mut stream: AssistantMessageEventStream,
        was_started: bool,
        thinking_level: ThinkingLevel,
    ) -> Arc<AssistantMessage> {
        let mut message = match stream.final_message() {
            Some(_) => stream.into_final_message().unwrap_or_default(),
            None => {
                let unfinished = stream.take_unfinished().filter(|_| was_started);
                let reason = stream.panic_message().unwrap_or("Stream ended without a terminal event");
                self.unterminated_message(unfinished.as_deref(), reason)
            }
        };
        message.thinking_level = Some(thinking_level);
        Arc::new(message)
    }

    /// Start the request: the configured options with the run's key, cancellation and identity.
    fn start_request(&self, transcript: TranscriptContext, api_key: Option<String>) -> AssistantMessageEventStream {
        let mut options = self.config.options.clone();
        if let Some(key) = api_key {
            options.api_key = Some(key);
        }
        options.cancel = Some(self.cancel.clone());
        let hooks = self.config.hooks();
        if let Some(hook) = &hooks.on_payload {
            options.on_payload = Some(Arc::clone(hook));
        }
        if let Some(hook) = &hooks.on_response {
            options.on_response = Some(Arc::clone(hook));
        }
        if let Some(hook) = &hooks.on_provider_stream_event {
            options.on_provider_stream_event = Some(Arc::clone(hook));
        }
        // Agent loops attribute requests to pi unless the configuration says otherwise.
        options.identity = Some(match options.identity.take() {
            None => ClientIdentity::shared_agent_default(),
            Some(given) => Arc::new(ClientIdentity::agent_default().merged_with(Some(&given))),
        });
        let model = &self.config.model;
        // A provider is user code: a panic while it starts the request ends this response, as
        // one while it streams does (see `AssistantMessageEventStream::panic_message`).
        let start = std::panic::AssertUnwindSafe(|| self.config.stream_fn.stream(model, transcript, options));
        std::panic::catch_unwind(start).unwrap_or_else(|payload| {
            AssistantMessageEventStream::from_panic(pi_types::panic_message(payload.as_ref()))
        })
    }

    /// A stream that ended without `done`/`error` (its provider may have panicked) must not
    /// hang or crash the run: keep what was streamed and end it as an error.
    fn unterminated_message(&self, partial: Option<&AssistantMessage>, reason: &str) -> AssistantMessage {
        let base = partial.cloned().unwrap_or_else(|| AssistantMessage {
            api: self.config.model.api.clone(),
            provider: self.config.model.provider.clone(),
            model: self.config.model.id.clone(),
            timestamp: pi_types::now_ms(),
            ..Default::default()
        });
        AssistantMessage { stop_reason: StopReason::Error, error_message: Some(reason.into()), ..base }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.return_cache();
    }
}

/// Declare the difference between the executable tools and the tools the transcript
/// declares, as `toolsAdded`/`toolsRemoved` on a system message among `pending`.
///
/// The last pending system message, if any, gets its tool fields replaced by the delta
/// (computed as if its own fields were empty). Otherwise a new system message is inserted
/// before the first non-system pending message when anything changed.
pub fn declare_tool_changes(context: &AgentContext, mut pending: Vec<AgentMessage>) -> Vec<AgentMessage> {
    let system_index = pending.iter().rposition(|m| matches!(m, AgentMessage::System(_)));
    let executable: Vec<&Tool> = context.tools.iter().map(|t| &t.spec().declaration).collect();
    // The pending system message counts as if it declared nothing: its tool fields are intent.
    let stripped =
        system_index.and_then(|i| pending[i].as_system()).map(|s| with_tool_changes(s, &ToolStateChanges::default()));
    let systems: Vec<&SystemMessage> = context
        .messages
        .systems()
        .chain(pending.iter().enumerate().filter_map(|(i, m)| match Some(i) == system_index {
            true => stripped.as_ref(),
            false => m.as_system(),
        }))
        .collect();
    let declared = current_tool_declarations(&systems);
    let changes = tool_state_changes(&declared, &executable);
    if let Some(index) = system_index {
        if let AgentMessage::System(system) = &pending[index] {
            let declares_nothing = system.tools_added.as_ref().is_none_or(Vec::is_empty)
                && system.tools_removed.as_ref().is_none_or(Vec::is_empty);
            if changes.is_empty() && declares_nothing {
                return pending;
            }
            pending[index] = with_tool_changes(system, &changes).into();
        }
        return pending;
    }
    if changes.is_empty() {
        return pending;
    }
    let update = with_tool_changes(
        &SystemMessage {
            content: SystemContent::Text(String::new()),
            timestamp: pi_types::now_ms(),
            ..Default::default()
        },
        &changes,
    );
    let index = pending.iter().position(|m| !matches!(m, AgentMessage::System(_))).unwrap_or(pending.len());
    pending.insert(index, update.into());
    pending
}

fn with_tool_changes(message: &SystemMessage, changes: &ToolStateChanges) -> SystemMessage {
    SystemMessage {
        tools_added: (!changes.tools_added.is_empty()).then(|| changes.tools_added.clone()),
        tools_removed: (!changes.tools_removed.is_empty()).then(|| changes.tools_removed.clone()),
        ..message.clone()
    }
}
