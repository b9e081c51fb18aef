//! The stateful agent: shared state, listeners, queues and the run lifecycle.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use pi_loop::{AgentContext, AgentEventSink, Delivery, EventInfo, LoopConfig, MessageList};
use pi_types::transcript::{current_system_message, initial_system_message_of, to_tool_declaration};
use pi_types::CancellationToken;
use pi_types::{
    catch_failure, catch_panic, AgentEvent, AgentMessage, AgentTool, AssistantContent, AssistantMessage, BoxError,
    ImageContent, Model, StopReason, ThinkingLevel, UserContent, UserMessage, UserMessageContent,
};
use tokio::sync::SetOnce;
use tokio::task::{AbortHandle, JoinHandle};

use crate::error::AgentError;
use crate::options::{default_model, AgentOptions, QueueMode};
use crate::pending::PendingToolCalls;
use crate::retry::RetryEvent;
use crate::settings::Settings;
use crate::state::{AgentState, StreamingMessage};
use crate::usage::{UsageTotal, UsageTotals};

/// An event listener: awaited for every event of a run, in subscription order.
///
/// It gets the event and the run's cancellation token. Returning `Err` (or panicking) is the
/// reference's throwing listener: the run fails (see [`Agent::subscribe`]).
pub type Listener =
    Arc<dyn for<'a> Fn(&'a AgentEvent, &'a CancellationToken) -> BoxFuture<'a, Result<(), BoxError>> + Send + Sync>;

/// What to prompt with: text (and images), or ready-made messages.
#[derive(Clone, Debug)]
pub enum PromptInput {
    /// A user message with one text block followed by the images.
    Text {
        /// The text.
        text: String,
        /// Images appended after the text block.
        images: Vec<ImageContent>,
    },
    /// Messages used as they are (one message or a batch).
    Messages(Vec<AgentMessage>),
}

impl PromptInput {
    /// Text with images.
    pub fn with_images(text: impl Into<String>, images: impl IntoIterator<Item = ImageContent>) -> Self {
        Self::Text { text: text.into(), images: images.into_iter().collect() }
    }

    fn into_messages(self) -> Vec<AgentMessage> {
        match self {
            Self::Messages(messages) => messages,
            Self::Text { text, images } => {
                let mut content = vec![UserContent::text(text)];
                content.extend(images.into_iter().map(UserContent::Image));
                vec![AgentMessage::from(UserMessage {
                    content: UserMessageContent::Blocks(content),
                    timestamp: pi_types::now_ms(),
                })]
            }
        }
    }
}

impl From<&str> for PromptInput {
    fn from(text: &str) -> Self {
        Self::Text { text: text.to_owned(), images: Vec::new() }
    }
}

impl From<String> for PromptInput {
    fn from(text: String) -> Self {
        Self::Text { text, images: Vec::new() }
    }
}

impl From<AgentMessage> for PromptInput {
    fn from(message: AgentMessage) -> Self {
        Self::Messages(vec![message])
    }
}

impl From<UserMessage> for PromptInput {
    fn from(message: UserMessage) -> Self {
        Self::Messages(vec![message.into()])
    }
}

impl From<Vec<AgentMessage>> for PromptInput {
    fn from(messages: Vec<AgentMessage>) -> Self {
        Self::Messages(messages)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while a lock is held leaves plain data behind: keep using it.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[derive(Default)]
struct PendingQueue {
    messages: VecDeque<AgentMessage>,
}

impl PendingQueue {
    fn peek(&self, mode: QueueMode) -> Vec<AgentMessage> {
        match mode {
            QueueMode::All => self.messages.iter().cloned().collect(),
            QueueMode::OneAtATime => self.messages.front().cloned().into_iter().collect(),
        }
    }

    fn drain(&mut self, mode: QueueMode) -> Vec<AgentMessage> {
        match mode {
            QueueMode::All => self.messages.drain(..).collect(),
            QueueMode::OneAtATime => self.messages.pop_front().into_iter().collect(),
        }
    }
}

/// Listeners in subscription order; ids grow, so the list is sorted by id.
///
/// Generic over the listener so that an entry and a synchronous closure share one allocation
/// (`Arc<ListenerEntry<SyncListener<F>>>` coerced to `Arc<ListenerEntry>`): every agent keeps
/// its listeners for as long as it lives.
struct ListenerEntry<L: ?Sized = dyn DeliverTo> {
    id: u64,
    listener: L,
}

/// How an entry's listener takes an event.
trait DeliverTo: Send + Sync {
    /// Calls a synchronous listener in place (no future, no allocation per event) and gives
    /// `None`; an asynchronous one is given back, to be called and awaited by the caller.
    fn deliver(&self, event: &AgentEvent) -> Option<&Listener>;
}

/// A synchronous listener.
struct SyncListener<F>(F);

impl<F: Fn(&AgentEvent) + Send + Sync> DeliverTo for SyncListener<F> {
    fn deliver(&self, event: &AgentEvent) -> Option<&Listener> {
        (self.0)(event);
        None
    }
}

impl DeliverTo for Listener {
    fn deliver(&self, _event: &AgentEvent) -> Option<&Listener> {
        Some(self)
    }
}

struct ActiveRun {
    id: u64,
    cancel: CancellationToken,
    idle: Arc<IdleSignal>,
    task: Option<AbortHandle>,
}

/// Everything the agent and its runs share.
pub(crate) struct AgentShared {
    /// A spin lock: taken for every event a run delivers, and held only for short, non-blocking
    /// work (a reducer step, a snapshot's pointer copies; no listener and no await runs under
    /// it), so it is released with a plain store where a mutex needs a second atomic
    /// read-modify-write (`stream`: about 1.06-1.09x the events/s). A panic while it is held
    /// leaves the state as it was, as with the other locks here.
    state: spin::mutex::SpinMutex<AgentState>,
    /// The options, compactly (see [`crate::settings`]).
    options: Mutex<Settings>,
    steering: Mutex<PendingQueue>,
    follow_ups: Mutex<PendingQueue>,
    listeners: Mutex<Arc<[Arc<ListenerEntry>]>>,
    /// Counts the changes of `listeners` (written under its lock), so a run's sink sees with one
    /// load whether its copy of the list is current.
    listeners_version: AtomicU64,
    next_id: AtomicU64,
    run: Mutex<Option<ActiveRun>>,
    /// The transcript's provider messages, carried from run to run: a prompt converts only
    /// its new messages. Replaced whenever the transcript is (its contract).
    transcript_cache: Mutex<pi_loop::TranscriptCache>,
}

impl AgentShared {
    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn unsubscribe(&self, id: u64) {
        let mut listeners = lock(&self.listeners);
        let kept: Vec<Arc<ListenerEntry>> = listeners.iter().filter(|e| e.id != id).cloned().collect();
        *listeners = kept.into();
        self.listeners_version.fetch_add(1, Ordering::Release);
    }

    /// The listeners as they are now, with the version they are at.
    fn listener_view(&self) -> ListenerView {
        let listeners = lock(&self.listeners);
        ListenerView { version: self.listeners_version.load(Ordering::Acquire), list: Arc::clone(&listeners) }
    }

    /// The reference's `processEvents`: reduce the state, then await every listener in order.
    ///
    /// Iterates like a JavaScript `Set`: a listener removed while the event is delivered is
    /// not called any more, one added meanwhile is called too. Synchronous listeners are
    /// called right here; the first asynchronous one turns the rest into a future.
    /// `metadata_changed`: for a `message_update`, whether the partial's metadata may have
    /// changed (see `EventInfo::metadata_changed`).
    async fn process(
        &self,
        event: &AgentEvent,
        metadata_changed: bool,
        cancel: &CancellationToken,
        view: &spin::mutex::SpinMutex<ListenerView>,
    ) -> Result<(), BoxError> {
        match self.process_now(event, metadata_changed, view) {
            None => Ok(()),
            Some(rest) => self.process_rest(event, cancel, view, rest).await,
        }
    }

    /// What [`process`](Self::process) does at once: the reducer and the synchronous listeners
    /// up to the first asynchronous one, whose part is returned.
    // Always inlined: it runs per event, and as a call (it has two callers) it cost about 35
    // instructions per delta more.
    #[inline(always)]
    fn process_now(
        &self,
        event: &AgentEvent,
        metadata_changed: bool,
        view: &spin::mutex::SpinMutex<ListenerView>,
    ) -> Option<PendingListeners> {
        let holds_partial = self.state.lock().reduce(event, metadata_changed);
        match self.call_sync_listeners(event, 0, &mut view.lock()) {
            None => {
                self.delivered(holds_partial);
                None
            }
            Some((last_id, listener)) => Some(PendingListeners { holds_partial, last_id, listener }),
        }
    }

    /// The rest of [`process`](Self::process), from its first asynchronous listener on.
    async fn process_rest(
        &self,
        event: &AgentEvent,
        cancel: &CancellationToken,
        view: &spin::mutex::SpinMutex<ListenerView>,
        rest: PendingListeners,
    ) -> Result<(), BoxError> {
        let outcome = self.call_listeners(event, cancel, rest.last_id, rest.listener, view).await;
        self.delivered(rest.holds_partial);
        outcome
    }

    /// Call synchronous listeners after `last_id` until an asynchronous one (returned with its
    /// id) or the end. Each step looks at the list as it is then (refreshing `view` when it
    /// changed), as JavaScript's `Set` iteration does.
    fn call_sync_listeners(
        &self,
        event: &AgentEvent,
        mut last_id: u64,
        view: &mut ListenerView,
    ) -> Option<(u64, Listener)> {
        // Where the next listener is in `view`: found by id only when the list changed (ids
        // grow along the list, and 0 is before every id).
        let mut index = if last_id == 0 { 0 } else { view.list.partition_point(|entry| entry.id <= last_id) };
        loop {
            if self.listeners_version.load(Ordering::Acquire) != view.version {
                *view = self.listener_view();
                index = view.list.partition_point(|entry| entry.id <= last_id);
            }
            let entry = view.list.get(index)?;
            index += 1;
            last_id = entry.id;
            if let Some(listener) = entry.listener.deliver(event) {
                return Some((last_id, Arc::clone(listener)));
            }
        }
    }

    async fn call_listeners(
        &self,
        event: &AgentEvent,
        cancel: &CancellationToken,
        last_id: u64,
        listener: Listener,
        view: &spin::mutex::SpinMutex<ListenerView>,
    ) -> Result<(), BoxError> {
        let mut next = Some((last_id, listener));
        while let Some((last_id, listener)) = next {
            listener(event, cancel).await?;
            next = self.call_sync_listeners(event, last_id, &mut view.lock());
        }
        Ok(())
    }

    /// After an event's listeners ran; `holds_partial`: what `reduce` returned.
    fn delivered(&self, holds_partial: bool) {
        if holds_partial {
            self.state.lock().release_partial();
        }
    }

    fn drain_steering(&self) -> Vec<AgentMessage> {
        let mode = lock(&self.options).steering_mode;
        lock(&self.steering).drain(mode)
    }

    fn drain_follow_ups(&self) -> Vec<AgentMessage> {
        let mode = lock(&self.options).follow_up_mode;
        lock(&self.follow_ups).drain(mode)
    }

    /// The loop configuration of a new run (the reference's `createLoopConfig`).
    /// `skip_initial_steering_poll`: the run's prompts were drained from the steering queue,
    /// so the loop's first poll of it finds nothing (the reference's option of that name).
    fn loop_config(
        self: &Arc<Self>,
        state: &AgentState,
        transcript_cache: pi_loop::TranscriptCache,
        skip_initial_steering_poll: bool,
    ) -> LoopConfig {
        let options = lock(&self.options).clone();
        let mut config = LoopConfig::new(Arc::clone(&state.model), Arc::clone(&options.stream_fn));
        let request = &mut config.options;
        request.reasoning = (state.thinking_level != ThinkingLevel::Off).then_some(state.thinking_level);
        request.session_id = options.session_id;
        request.transport = Some(options.transport);
        request.thinking_budgets = options.thinking_budgets;
        request.max_retry_delay_ms = options.max_retry_delay_ms;
        request.identity = options.identity;
        request.api_options = options.api_options;
        config.tool_execution = options.tool_execution;
        config.trace = options.trace;
        config.transcript_cache = Some(transcript_cache);
        let prepares_turns = options.hooks.fns().prepare_next_turn.is_some();
        let mut config = config.with_hooks(options.hooks);
        if prepares_turns {
            // Like the reference, the hook itself is looked up when a turn is prepared.
            let core = Arc::downgrade(self);
            config = config.prepare_next_turn(move |turn, cancel| {
                let hook = core.upgrade().and_then(|core| lock(&core.options).hooks.fns().prepare_next_turn.clone());
                match hook {
                    Some(hook) => hook(turn, &cancel),
                    None => Box::pin(std::future::ready(Ok(None))),
                }
            });
        }
        let core = Arc::downgrade(self);
        let skip = std::sync::atomic::AtomicBool::new(skip_initial_steering_poll);
        let config = config.get_steering_messages(move || {
            let messages = match skip.swap(false, Ordering::Relaxed) {
                true => Vec::new(),
                false => core.upgrade().map(|core| core.drain_steering()).unwrap_or_default(),
            };
            std::future::ready(messages)
        });
        let core = Arc::downgrade(self);
        config.get_follow_up_messages(move || {
            std::future::ready(core.upgrade().map(|core| core.drain_follow_ups()).unwrap_or_default())
        })
    }

    /// After a run that ended normally: the run of the next attempt when the retry policy
    /// asks for one (protocol in `retry.rs`). `retries`: the retries made so far in this run.
    async fn retry(self: &Arc<Self>, sink: &Arc<RunSink>, retries: &mut u32) -> Option<LoopRun> {
        let policy = lock(&self.options).retry.clone()?;
        let last = match self.state.lock().messages.last() {
            Some(AgentMessage::Assistant(message)) => Some(Arc::clone(message)),
            _ => None,
        };
        let failed = last.as_ref().filter(|m| m.stop_reason == StopReason::Error);
        let error_text = failed.and_then(|m| m.error_message.as_deref()).filter(|e| !e.is_empty());
        let error_text = error_text.unwrap_or("Unknown error").to_owned();
        let finished = |success: bool, attempt: u32| RetryEvent::Finished {
            success,
            attempt,
            final_error: failed.map(|_| error_text.clone()),
        };
        let retryable = failed.is_some_and(|m| policy.is_retryable(m));
        if !retryable || *retries >= policy.budget() || sink.cancel.is_cancelled() {
            if *retries > 0 {
                let success =
                    last.as_ref().is_some_and(|m| !matches!(m.stop_reason, StopReason::Error | StopReason::Aborted));
                policy.report(finished(success, *retries));
            }
            return None;
        }
        let failed = Arc::clone(failed?);
        *retries += 1;
        let attempt = *retries;
        let delay = policy.delay(attempt);
        policy.report(RetryEvent::Scheduled {
            attempt,
            max_attempts: policy.budget(),
            delay,
            error_message: error_text.clone(),
        });
        if !sleep_unless_cancelled(delay, &sink.cancel).await {
            policy.report(finished(false, attempt));
            return None;
        }
        // The failed response leaves the transcript; the run continues from the message before.
        let (snapshot, transcript_cache) = {
            let mut state = self.state.lock();
            let failed_is_last =
                matches!(state.messages.last(), Some(AgentMessage::Assistant(m)) if Arc::ptr_eq(m, &failed));
            if failed_is_last {
                let kept = state.messages.len().saturating_sub(1);
                state.messages.truncate(kept);
            }
            state.error_message = None;
            let mut cache = lock(&self.transcript_cache);
            *cache = pi_loop::TranscriptCache::new();
            (state.clone(), cache.clone())
        };
        policy.report(RetryEvent::AttemptStart { attempt });
        let context = AgentContext::new(snapshot.messages.clone(), snapshot.tools.to_vec());
        let config = self.loop_config(&snapshot, transcript_cache, false);
        let loop_sink: Arc<dyn AgentEventSink> = sink.clone();
        Some(Box::pin(pi_loop::run_agent_loop_continue(context, config, loop_sink, sink.cancel.clone())))
    }

    /// The reference's `handleRunFailure`: report a failed run with a failure message.
    async fn report_failure(&self, sink: &RunSink, error: String, aborted: bool) -> Result<(), AgentError> {
        let model = Arc::clone(&self.state.lock().model);
        let failure = AgentMessage::from(AssistantMessage {
            content: vec![AssistantContent::text("")],
            api: model.api.clone(),
            provider: model.provider.clone(),
            model: model.id.clone(),
            stop_reason: if aborted { StopReason::Aborted } else { StopReason::Error },
            error_message: Some(error.into()),
            timestamp: pi_types::now_ms(),
            ..Default::default()
        });
        let events = [
            AgentEvent::MessageStart { message: failure.clone() },
            AgentEvent::MessageEnd { message: failure.clone() },
            AgentEvent::TurnEnd { message: failure.clone(), tool_results: Vec::new() },
            AgentEvent::AgentEnd { messages: vec![failure] },
        ];
        for event in &events {
            let delivered = self.process(event, true, &sink.cancel, &sink.listeners);
            catch_failure(delivered).await.map_err(AgentError::Listener)?;
        }
        Ok(())
    }
}

/// The loop's sink for one run: the reducer and the listeners.
struct RunSink {
    core: Arc<AgentShared>,
    cancel: CancellationToken,
    /// The run's copy of the listener list: delivering an event takes the list only when it
    /// changed. Events of a run are delivered one at a time, so this lock is never contended:
    /// a spin lock, one atomic operation per event.
    listeners: spin::mutex::SpinMutex<ListenerView>,
    /// This sink, for an update whose listeners go on asynchronously: their future owns it.
    this: Weak<RunSink>,
}

/// An event's listeners from the first asynchronous one on (see [`AgentShared::process_now`]).
struct PendingListeners {
    /// What the reducer returned for the event.
    holds_partial: bool,
    last_id: u64,
    listener: Listener,
}

/// A copy of the listener list and the version it is at.
struct ListenerView {
    version: u64,
    list: Arc<[Arc<ListenerEntry>]>,
}

impl AgentEventSink for RunSink {
    /// [`AgentShared::process`] for an event given by value: the same steps, and when a listener is
    /// asynchronous, a future that owns the event and this sink.
    fn deliver(&self, event: AgentEvent, info: EventInfo) -> Delivery {
        let Some(rest) = self.core.process_now(&event, info.metadata_changed(), &self.listeners) else {
            return Delivery::done();
        };
        let Some(sink) = self.this.upgrade() else {
            // Unreachable while the run delivers through it; finish the state's step anyway.
            self.core.delivered(rest.holds_partial);
            return Delivery::ready(Err("the run's sink is gone".into()));
        };
        Delivery::pending(async move { sink.core.process_rest(&event, &sink.cancel, &sink.listeners, rest).await })
    }
}

/// What a run does.
enum RunWork {
    /// `run_agent_loop` with these prompts.
    Prompt(Vec<AgentMessage>),
    /// `run_agent_loop` with prompts drained from the steering queue: the loop's first poll of
    /// the queue is skipped.
    Resume(Vec<AgentMessage>),
    /// `run_agent_loop_continue`.
    Continue,
}

/// Ends a run however its task ends (normally, by panic, or aborted with the agent).
struct FinishGuard {
    core: Arc<AgentShared>,
    run_id: u64,
    idle: Arc<IdleSignal>,
}

/// Set once when a run has settled; `wait_for_idle` waits for it.
type IdleSignal = SetOnce<()>;

impl Drop for FinishGuard {
    fn drop(&mut self) {
        let mut run = lock(&self.core.run);
        {
            let mut state = self.core.state.lock();
            state.is_streaming = false;
            state.clear_streaming();
            state.pending_tool_calls = PendingToolCalls::shared_empty();
        }
        if run.as_ref().is_some_and(|r| r.id == self.run_id) {
            *run = None;
        }
        drop(run);
        // Set once: the guard is the only one that sets it.
        let _ = self.idle.set(());
    }
}

/// A run of the loop, boxed.
type LoopRun = BoxFuture<'static, Result<Vec<AgentMessage>, pi_loop::LoopError>>;

/// Sleep for `delay` unless `cancel` fires first; whether the whole delay passed. A runtime
/// without a timer (Tokio panics when a sleep is made there) counts as cancelled.
async fn sleep_unless_cancelled(delay: std::time::Duration, cancel: &CancellationToken) -> bool {
    let Ok(sleep) = std::panic::catch_unwind(|| tokio::time::sleep(delay)) else { return false };
    let cancelled = std::pin::pin!(cancel.cancelled());
    match futures::future::select(Box::pin(sleep), cancelled).await {
        futures::future::Either::Left(_) => !cancel.is_cancelled(),
        futures::future::Either::Right(_) => false,
    }
}

/// A run's task: the loop, then the failure report if it failed.
///
/// A plain function, not an `async fn` (see docs/architecture.md, "Futures every run holds"):
/// the loop's future is made here, so the context and configuration go straight into its heap
/// box instead of staying in this task's state for the whole run.
fn drive(
    core: Arc<AgentShared>,
    guard: FinishGuard,
    work: RunWork,
    context: AgentContext,
    config: LoopConfig,
    cancel: CancellationToken,
) -> impl Future<Output = Result<(), AgentError>> + Send + 'static {
    let listeners = spin::mutex::SpinMutex::new(core.listener_view());
    let sink = Arc::new_cyclic(|this| RunSink {
        core: Arc::clone(&core),
        cancel: cancel.clone(),
        listeners,
        this: Weak::clone(this),
    });
    let loop_sink: Arc<dyn AgentEventSink> = sink.clone();
    let run: LoopRun = match work {
        RunWork::Prompt(prompts) | RunWork::Resume(prompts) => {
            Box::pin(pi_loop::run_agent_loop(prompts, context, config, loop_sink, cancel.clone()))
        }
        RunWork::Continue => Box::pin(pi_loop::run_agent_loop_continue(context, config, loop_sink, cancel.clone())),
    };
    settle(guard, sink, run)
}

/// The task a run is spawned as holds only what the `async` block captures, small enough for
/// the runtime's smallest task cell. The agent and the token are the sink's.
#[allow(clippy::manual_async_fn)] // see docs/architecture.md, "Futures every run holds"
fn settle(
    guard: FinishGuard,
    sink: Arc<RunSink>,
    run: LoopRun,
) -> impl Future<Output = Result<(), AgentError>> + Send + 'static {
    async move {
        let mut run = run;
        let mut retries = 0;
        let failure = loop {
            match catch_panic(run).await {
                // Boxed: held inline, the rare retry would make every run's task larger.
                Ok(Ok(_)) => match Box::pin(sink.core.retry(&sink, &mut retries)).await {
                    Some(next) => run = next,
                    None => break None,
                },
                Ok(Err(error)) => break Some(error.to_string()),
                Err(panic) => break Some(panic),
            }
        };
        let outcome = match failure {
            // Boxed: held inline, the rare failure report would make every run's task larger.
            Some(error) => {
                let aborted = sink.cancel.is_cancelled();
                Box::pin(sink.core.report_failure(&sink, error, aborted)).await
            }
            None => Ok(()),
        };
        drop(guard);
        outcome
    }
}

/// The stateful agent (the reference's `Agent`).
///
/// Cheap to clone: clones share one agent. `Send + Sync`; every method may be called from any
/// task, also from inside a listener of the running agent. Runs are spawned on the current
/// Tokio runtime and owned by the agent: when the last `Agent` handle is dropped, an active
/// run is cancelled and its task aborted. A listener that needs the agent should hold a
/// [`WeakAgent`] (from [`Agent::downgrade`]) to avoid keeping the agent alive through its own
/// listener list.
#[derive(Clone)]
pub struct Agent {
    handle: Arc<AgentHandle>,
}

/// A non-owning reference to an [`Agent`].
#[derive(Clone)]
pub struct WeakAgent {
    handle: Weak<AgentHandle>,
}

impl std::fmt::Debug for WeakAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeakAgent").field("alive", &(self.handle.strong_count() > 0)).finish()
    }
}

impl WeakAgent {
    /// The agent, if any handle of it is still alive.
    pub fn upgrade(&self) -> Option<Agent> {
        self.handle.upgrade().map(|handle| Agent { handle })
    }
}

struct AgentHandle {
    core: Arc<AgentShared>,
}

impl Drop for AgentHandle {
    fn drop(&mut self) {
        if let Some(run) = lock(&self.core.run).as_ref() {
            run.cancel.cancel();
            if let Some(task) = &run.task {
                task.abort();
            }
        }
    }
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Formatted from a snapshot: the state's lock is not held while the formatter writes.
        let state = self.core().state.lock().snapshot();
        f.debug_struct("Agent").field("state", &state).finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent from its options.
    pub fn new(options: AgentOptions) -> Self {
        let mut options = options;
        let initial = std::mem::take(&mut options.initial_state);
        let mut messages = initial.messages;
        if !matches!(messages.first(), Some(AgentMessage::System(_))) {
            let declarations = || initial.tools.iter().map(|t| to_tool_declaration(&t.spec().declaration)).collect();
            let lead = initial_system_message_of(initial.system_prompt.as_deref(), declarations);
            if let Some(lead) = lead {
                messages.insert(0, lead.into());
            }
        }
        let model = initial.model.unwrap_or_else(|| Arc::new(default_model()));
        let mut state = AgentState::new(model, initial.thinking_level, initial.tools, messages);
        state.usage.total = std::mem::take(&mut options.usage);
        let core = AgentShared {
            state: spin::mutex::SpinMutex::new(state),
            options: Mutex::new(Settings::new(options)),
            steering: Mutex::default(),
            follow_ups: Mutex::default(),
            listeners: Mutex::new(Arc::from(Vec::new())),
            listeners_version: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            run: Mutex::new(None),
            transcript_cache: Mutex::default(),
        };
        Self { handle: Arc::new(AgentHandle { core: Arc::new(core) }) }
    }

    fn core(&self) -> &Arc<AgentShared> {
        &self.handle.core
    }

    /// A non-owning reference, e.g. for listeners that call back into the agent.
    pub fn downgrade(&self) -> WeakAgent {
        WeakAgent { handle: Arc::downgrade(&self.handle) }
    }

    // ----- listeners -------------------------------------------------------------------

    /// Subscribe an async listener to every event.
    ///
    /// Listeners are awaited one after another in subscription order and are part of the
    /// run: the next event, and the agent's return to idle after `agent_end`, wait for them.
    /// The state is already updated for the event when a listener runs. A listener that
    /// returns `Err` or panics fails the run like a throwing listener in the reference: the
    /// agent reports a failure message (`message_start`, `message_end`, `turn_end`,
    /// `agent_end`); if a listener fails again during that report, `prompt`/`continue`
    /// return [`AgentError::Listener`].
    ///
    /// As in the reference, the listener stays until [`Subscription::unsubscribe`] is called
    /// or the agent is dropped: dropping the returned [`Subscription`] (even `let _ = ...`)
    /// does not remove it.
    ///
    /// ```
    /// # let agent = pi_agent::Agent::new(pi_agent::AgentOptions::new(std::sync::Arc::new(pi_providers::faux::FauxProvider::default())));
    /// let subscription = agent.subscribe(|event, _cancel| Box::pin(async move {
    ///     println!("{}", event.type_name());
    ///     Ok(())
    /// }));
    /// subscription.unsubscribe(); // the listener is removed here, not before
    /// ```
    pub fn subscribe<F>(&self, listener: F) -> Subscription
    where
        F: for<'a> Fn(&'a AgentEvent, &'a CancellationToken) -> BoxFuture<'a, Result<(), BoxError>>
            + Send
            + Sync
            + 'static,
    {
        self.subscribe_listener(Arc::new(listener))
    }

    /// Subscribe a synchronous closure (it cannot fail; a panic counts as a failure).
    pub fn subscribe_fn<F>(&self, listener: F) -> Subscription
    where
        F: Fn(&AgentEvent) + Send + Sync + 'static,
    {
        let id = self.core().next_id();
        self.add_listener(Arc::new(ListenerEntry { id, listener: SyncListener(listener) }))
    }

    /// Subscribe a shared [`Listener`].
    pub fn subscribe_listener(&self, listener: Listener) -> Subscription {
        let id = self.core().next_id();
        self.add_listener(Arc::new(ListenerEntry { id, listener }))
    }

    fn add_listener(&self, entry: Arc<ListenerEntry>) -> Subscription {
        let core = self.core();
        let id = entry.id;
        let mut listeners = lock(&core.listeners);
        let mut list = listeners.to_vec();
        list.push(entry);
        *listeners = list.into();
        core.listeners_version.fetch_add(1, Ordering::Release);
        Subscription { core: Arc::downgrade(core), id }
    }

    // ----- state -------------------------------------------------------------------------

    /// A snapshot of the whole state (cheap: shared lists, no copies).
    pub fn state(&self) -> AgentState {
        self.core().state.lock().snapshot()
    }

    /// The transcript (shared, not copied).
    pub fn messages(&self) -> MessageList {
        self.core().state.lock().messages.clone()
    }

    /// Replace the transcript (the list is copied into the agent; a running loop keeps its own
    /// context, later `message_end`s append to the new list).
    pub fn set_messages(&self, messages: impl IntoIterator<Item = AgentMessage>) {
        let messages: MessageList = messages.into_iter().collect();
        let mut state = self.core().state.lock();
        state.messages = messages;
        *lock(&self.core().transcript_cache) = pi_loop::TranscriptCache::new();
    }

    /// The system prompt replayed from the transcript's system messages.
    pub fn system_prompt(&self) -> String {
        let messages = self.messages();
        pi_types::transcript::current_system_prompt(messages.systems())
    }

    /// Tokens and cost of the current (or last) run and of the agent's whole life, from each
    /// assistant message's `usage` (see [`UsageTotals`]).
    pub fn usage(&self) -> UsageTotals {
        self.core().state.lock().usage.clone()
    }

    /// The model of the next run.
    pub fn model(&self) -> Arc<Model> {
        Arc::clone(&self.core().state.lock().model)
    }

    /// Set the model of the next run (a `Model`, or a shared `Arc<Model>`).
    pub fn set_model(&self, model: impl Into<Arc<Model>>) {
        self.core().state.lock().model = model.into();
    }

    /// The thinking level of the next run.
    pub fn thinking_level(&self) -> ThinkingLevel {
        self.core().state.lock().thinking_level
    }

    /// Set the thinking level of the next run.
    pub fn set_thinking_level(&self, level: ThinkingLevel) {
        self.core().state.lock().thinking_level = level;
    }

    /// The executable tools.
    pub fn tools(&self) -> Arc<[Arc<dyn AgentTool>]> {
        Arc::clone(&self.core().state.lock().tools)
    }

    /// Replace the executable tools (takes effect with the next run).
    pub fn set_tools(&self, tools: impl IntoIterator<Item = Arc<dyn AgentTool>>) {
        let tools: Vec<Arc<dyn AgentTool>> = tools.into_iter().collect();
        self.core().state.lock().tools = tools.into();
    }

    /// Whether a run is active.
    pub fn is_streaming(&self) -> bool {
        self.core().state.lock().is_streaming
    }

    /// The message being streamed, if any.
    pub fn streaming_message(&self) -> Option<StreamingMessage> {
        self.core().state.lock().current_streaming_message()
    }

    /// Ids of tool calls currently executing.
    pub fn pending_tool_calls(&self) -> Arc<PendingToolCalls> {
        Arc::clone(&self.core().state.lock().pending_tool_calls)
    }

    /// The error text of the last failed turn.
    pub fn error_message(&self) -> Option<String> {
        self.core().state.lock().error_message.clone()
    }

    /// A copy of the options (hooks, modes, request settings; no initial state).
    pub fn options(&self) -> AgentOptions {
        lock(&self.core().options).to_options()
    }

    /// Change options (hooks, modes, request settings): `update` gets a copy of them (with no
    /// initial state) and returns the new ones, e.g. `agent.update_options(|o| o.finish_turn(..))`.
    /// Runs read them when they start (`prepare_next_turn` and the queue modes: when used).
    pub fn update_options(&self, update: impl FnOnce(AgentOptions) -> AgentOptions) {
        let mut settings = lock(&self.core().options);
        *settings = Settings::new(update(settings.to_options()));
    }

    /// How steering messages are drained.
    pub fn steering_mode(&self) -> QueueMode {
        lock(&self.core().options).steering_mode
    }

    /// Change how steering messages are drained (effective at the next poll).
    pub fn set_steering_mode(&self, mode: QueueMode) {
        lock(&self.core().options).steering_mode = mode;
    }

    /// How follow-up messages are drained.
    pub fn follow_up_mode(&self) -> QueueMode {
        lock(&self.core().options).follow_up_mode
    }

    /// Change how follow-up messages are drained (effective at the next poll).
    pub fn set_follow_up_mode(&self, mode: QueueMode) {
        lock(&self.core().options).follow_up_mode = mode;
    }

    // ----- queues ------------------------------------------------------------------------

    /// Queue a message for the running agent: delivered after the current turn.
    pub fn steer(&self, message: impl Into<AgentMessage>) {
        lock(&self.core().steering).messages.push_back(message.into());
    }

    /// Queue a message to handle when the agent would otherwise stop.
    pub fn follow_up(&self, message: impl Into<AgentMessage>) {
        lock(&self.core().follow_ups).messages.push_back(message.into());
    }

    /// Drop queued steering messages.
    pub fn clear_steering_queue(&self) {
        lock(&self.core().steering).messages.clear();
    }

    /// Drop queued follow-up messages.
    pub fn clear_follow_up_queue(&self) {
        lock(&self.core().follow_ups).messages.clear();
    }

    /// Drop both queues.
    pub fn clear_all_queues(&self) {
        self.clear_steering_queue();
        self.clear_follow_up_queue();
    }

    /// Whether either queue holds messages.
    pub fn has_queued_messages(&self) -> bool {
        !lock(&self.core().steering).messages.is_empty() || !lock(&self.core().follow_ups).messages.is_empty()
    }

    /// The messages the next poll would deliver (steering first, else follow-ups), not consumed.
    pub fn peek_queued_messages(&self) -> Vec<AgentMessage> {
        let (steering_mode, follow_up_mode) = (self.steering_mode(), self.follow_up_mode());
        let steering = lock(&self.core().steering).peek(steering_mode);
        if !steering.is_empty() {
            return steering;
        }
        lock(&self.core().follow_ups).peek(follow_up_mode)
    }

    // ----- runs --------------------------------------------------------------------------

    /// Start a run with a prompt: text (see [`PromptInput::with_images`]), one message, or a
    /// batch.
    ///
    /// The run starts at once (the agent is busy from this call on) on the current Tokio
    /// runtime; the returned handle resolves when the run settled (after the `agent_end`
    /// listeners). Failures of the model or of a hook do not make it an `Err`: they end the
    /// run with a failure message in the transcript and in [`Agent::error_message`].
    /// Dropping the handle before it resolves aborts the run like [`Agent::abort`]; the run
    /// still settles in the background. [`RunHandle::detach`] lets it run on instead: so does
    /// `agent.prompt(..).detach()`, where `let _ = agent.prompt(..)` drops the handle at once
    /// and aborts the run.
    ///
    /// While a run is active this returns [`AgentError::AlreadyProcessingPrompt`].
    pub fn prompt(&self, input: impl Into<PromptInput>) -> RunHandle {
        let input = input.into();
        self.start(AgentError::AlreadyProcessingPrompt, move |_, _| Ok(RunWork::Prompt(input.into_messages())))
    }

    /// Continue from the current transcript (the reference's `continue()`).
    ///
    /// After a user or tool-result message the loop continues directly. After an assistant
    /// message the steering queue is drained and run like a prompt (without the loop's
    /// initial steering poll), else the follow-up queue, else this fails with
    /// [`AgentError::ContinueFromAssistant`]. An empty or system-only transcript fails with
    /// [`AgentError::NoMessagesToContinue`]. Otherwise like [`Agent::prompt`].
    #[doc(alias = "continue")]
    pub fn continue_run(&self) -> RunHandle {
        self.start(AgentError::AlreadyProcessingContinue, |core, state| {
            let messages = &state.messages;
            let Some(last) = messages.last() else { return Err(AgentError::NoMessagesToContinue) };
            // System-only: the list counts its system messages, no walk over the history.
            if messages.systems().len() == messages.len() {
                return Err(AgentError::NoMessagesToContinue);
            }
            if !matches!(last, AgentMessage::Assistant(_)) {
                return Ok(RunWork::Continue);
            }
            let steering = core.drain_steering();
            if !steering.is_empty() {
                return Ok(RunWork::Resume(steering));
            }
            let follow_ups = core.drain_follow_ups();
            if !follow_ups.is_empty() {
                return Ok(RunWork::Prompt(follow_ups));
            }
            Err(AgentError::ContinueFromAssistant)
        })
    }

    fn start(
        &self,
        busy: AgentError,
        plan: impl FnOnce(&AgentShared, &AgentState) -> Result<RunWork, AgentError>,
    ) -> RunHandle {
        let core = self.core();
        let mut slot = lock(&core.run);
        if slot.is_some() {
            return RunHandle::failed(busy);
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return RunHandle::failed(AgentError::NoRuntime);
        };
        // The cache is taken with the transcript it belongs to (both are replaced under this lock).
        let (snapshot, transcript_cache) = {
            let state = core.state.lock();
            (state.clone(), lock(&core.transcript_cache).clone())
        };
        let work = match plan(core, &snapshot) {
            Ok(work) => work,
            Err(error) => return RunHandle::failed(error),
        };
        let cancel = CancellationToken::new();
        // The run shares the transcript: a prompt costs its new messages, not the history.
        let context = AgentContext::new(snapshot.messages.clone(), snapshot.tools.to_vec());
        let config = core.loop_config(&snapshot, transcript_cache, matches!(work, RunWork::Resume(_)));
        drop(snapshot);
        {
            let mut state = core.state.lock();
            state.is_streaming = true;
            state.clear_streaming();
            state.error_message = None;
            state.usage.run = UsageTotal::default();
        }
        let run_id = core.next_id();
        let idle = Arc::new(IdleSignal::new());
        *slot = Some(ActiveRun { id: run_id, cancel: cancel.clone(), idle: Arc::clone(&idle), task: None });
        // Register first, spawn unlocked: a task that ends at once (runtime shutting down) clears
        // the slot itself.
        drop(slot);
        let guard = FinishGuard { core: Arc::clone(core), run_id, idle };
        let join = runtime.spawn(drive(Arc::clone(core), guard, work, context, config, cancel.clone()));
        if let Some(run) = lock(&core.run).as_mut().filter(|run| run.id == run_id) {
            run.task = Some(join.abort_handle());
        }
        RunHandle { inner: HandleInner::Running { join, cancel, settled: false, detached: false } }
    }

    /// Abort the active run, if any (its cancellation token is cancelled). Cooperative: the
    /// providers and tools that watch the token end the run (see the crate docs).
    pub fn abort(&self) {
        if let Some(run) = lock(&self.core().run).as_ref() {
            run.cancel.cancel();
        }
    }

    /// The cancellation token of the active run, if any (the reference's `signal`).
    pub fn cancellation_token(&self) -> Option<CancellationToken> {
        lock(&self.core().run).as_ref().map(|run| run.cancel.clone())
    }

    /// Resolves when the run active at the time of the call has settled (after its `agent_end`
    /// listeners); at once when idle. Awaiting it inside a listener of that run never resolves.
    pub fn wait_for_idle(&self) -> impl Future<Output = ()> + Send + 'static {
        let idle = lock(&self.core().run).as_ref().map(|run| Arc::clone(&run.idle));
        async move {
            if let Some(idle) = idle {
                // Set however the run's task ends (its guard sets it when dropped).
                idle.wait().await;
            }
        }
    }

    /// Clear the transcript down to the replayed system message (prompt and tool baseline),
    /// the queues and the error. Fails while a run is active.
    pub fn reset(&self) -> Result<(), AgentError> {
        let core = self.core();
        let slot = lock(&core.run);
        if slot.is_some() {
            return Err(AgentError::AlreadyProcessingReset);
        }
        {
            let mut state = core.state.lock();
            let baseline = current_system_message(state.messages.systems());
            state.messages = baseline.map(AgentMessage::from).into_iter().collect();
            *lock(&core.transcript_cache) = pi_loop::TranscriptCache::new();
            state.is_streaming = false;
            state.clear_streaming();
            state.pending_tool_calls = PendingToolCalls::shared_empty();
            state.error_message = None;
        }
        drop(slot);
        self.clear_all_queues();
        Ok(())
    }
}

/// A listener registration, the reference's unsubscribe function as a value.
///
/// The listener stays registered until [`Subscription::unsubscribe`] is called or the agent is
/// dropped; dropping the `Subscription` itself changes nothing, so `let _ = agent.subscribe_fn(..)`
/// and `agent.subscribe_fn(..);` keep listening. It holds no reference to the agent.
pub struct Subscription {
    core: Weak<AgentShared>,
    id: u64,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").field("id", &self.id).finish()
    }
}

impl Subscription {
    /// Remove the listener. A run delivering an event at the moment does not call it any more
    /// for that event if it had not reached it yet, like deleting from a JavaScript `Set`
    /// during iteration. Nothing happens when the agent is gone.
    pub fn unsubscribe(self) {
        if let Some(core) = self.core.upgrade() {
            core.unsubscribe(self.id);
        }
    }
}

enum HandleInner {
    Failed(AgentError),
    Running { join: JoinHandle<Result<(), AgentError>>, cancel: CancellationToken, settled: bool, detached: bool },
}

/// The outcome of a started run (from [`Agent::prompt`] / [`Agent::continue_run`]).
///
/// Resolves when the run settled. Dropping it earlier aborts the run (the run still emits its
/// final events and the agent returns to idle).
#[must_use = "dropping a RunHandle aborts the run; await it or call detach()"]
pub struct RunHandle {
    inner: HandleInner,
}

impl std::fmt::Debug for RunHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            HandleInner::Failed(error) => f.debug_tuple("RunHandle::Failed").field(error).finish(),
            HandleInner::Running { settled, .. } => {
                f.debug_struct("RunHandle::Running").field("settled", settled).finish_non_exhaustive()
            }
        }
    }
}

impl RunHandle {
    fn failed(error: AgentError) -> Self {
        Self { inner: HandleInner::Failed(error) }
    }

    /// Whether the call was refused (no run was started).
    pub fn is_refused(&self) -> bool {
        matches!(self.inner, HandleInner::Failed(_))
    }

    /// The run's cancellation token (`None` when the call was refused).
    pub fn cancellation_token(&self) -> Option<&CancellationToken> {
        match &self.inner {
            HandleInner::Running { cancel, .. } => Some(cancel),
            HandleInner::Failed(_) => None,
        }
    }

    /// Let the run go on without awaiting it (dropping the handle would abort it). The run
    /// still ends when the last handle of its [`Agent`] is dropped.
    pub fn detach(mut self) {
        if let HandleInner::Running { detached, .. } = &mut self.inner {
            *detached = true;
        }
    }
}

impl Future for RunHandle {
    type Output = Result<(), AgentError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.inner {
            HandleInner::Failed(error) => Poll::Ready(Err(error.clone())),
            HandleInner::Running { join, settled, .. } => {
                let outcome = std::task::ready!(Pin::new(join).poll(cx));
                *settled = true;
                Poll::Ready(match outcome {
                    Ok(outcome) => outcome,
                    Err(_) => Err(AgentError::AgentDropped),
                })
            }
        }
    }
}

impl Drop for RunHandle {
    fn drop(&mut self) {
        if let HandleInner::Running { cancel, settled: false, detached: false, .. } = &self.inner {
            cancel.cancel();
        }
    }
}
