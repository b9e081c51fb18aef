//! Tool execution: preparation in source order, then sequential or concurrent execution.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use futures::future::{BoxFuture, Either};
use pi_types::validation::validate_tool_arguments;
use pi_types::CancellationToken;
use pi_types::{
    catch_call, AgentEvent, AgentMessage, AgentTool, AgentToolResult, AssistantContent, AssistantMessage, ToolCall,
    ToolExecutionMode, ToolResultMessage, ToolUpdateFn,
};
use serde_json::{Map, Value};
use tracing::Span;

use crate::context::{AfterToolCallContext, AgentContext, BeforeToolCallContext};
use crate::hooks::{HookFns, Hooks};
use crate::sink::Emitter;
use crate::trace::{end_tool, tool_span, InSpan, LiveSpan};
use crate::LoopError;

/// The final outcome of one tool call after the hooks ran.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallOutcome {
    /// The raw tool call.
    pub tool_call: ToolCall,
    /// The result.
    pub result: AgentToolResult,
    /// Whether it counts as an error.
    pub is_error: bool,
    /// How long `execute` took; `None` when the tool did not run.
    pub duration_ms: Option<u64>,
}

pub(crate) struct ToolBatch {
    /// Shared by the events, the context and the run's new messages.
    pub(crate) messages: Vec<Arc<ToolResultMessage>>,
    pub(crate) terminate: bool,
}

/// Where a batch's `execute_tool` spans go: under the run's span, with content or not.
#[derive(Clone, Copy)]
pub(crate) struct ToolTrace<'a> {
    pub(crate) parent: Option<&'a Span>,
    pub(crate) record_content: bool,
}

impl ToolTrace<'_> {
    fn span(&self, call: &ToolCall) -> LiveSpan {
        tool_span(self.parent, call, self.record_content)
    }

    fn end(&self, span: &LiveSpan, outcome: &Finished) {
        end_tool(span.as_deref(), &outcome.result, outcome.is_error, self.record_content);
    }
}

enum Preparation {
    Immediate(Box<AgentToolResult>),
    Prepared { tool: Arc<dyn AgentTool>, args: Value },
}

fn error_result(text: impl Into<String>) -> AgentToolResult {
    AgentToolResult::text(text)
}

fn boxed_error(text: impl Into<String>) -> Box<AgentToolResult> {
    Box::new(error_result(text))
}

const ABORTED: &str = "Operation aborted";

fn raw_args(call: &ToolCall) -> Box<Value> {
    Box::new(Value::Object(call.arguments.clone()))
}

/// A call's result once its hooks ran. A batch keeps its calls beside their results, so
/// nothing here copies the call (a [`ToolCallOutcome`] does, for [`run_tool_call`]).
struct Finished {
    result: AgentToolResult,
    is_error: bool,
    duration_ms: Option<u64>,
}

impl Finished {
    /// A call that did not run.
    fn immediate(result: AgentToolResult) -> Box<Self> {
        Box::new(Self { result, is_error: true, duration_ms: None })
    }

    fn into_outcome(self, call: &ToolCall) -> ToolCallOutcome {
        let Self { result, is_error, duration_ms } = self;
        ToolCallOutcome { tool_call: call.clone(), result, is_error, duration_ms }
    }
}

async fn prepare(
    context: &AgentContext,
    tools: &[Arc<dyn AgentTool>],
    assistant: &AssistantMessage,
    call: &ToolCall,
    hooks: &HookFns,
    cancel: &CancellationToken,
) -> Preparation {
    // Once cancelled, skip preparation and hooks; the call still gets a result.
    if cancel.is_cancelled() {
        return Preparation::Immediate(boxed_error(ABORTED));
    }
    let Some(tool) = tools.iter().find(|t| t.spec().name() == call.name) else {
        return Preparation::Immediate(boxed_error(format!("Tool {} not found", call.name)));
    };
    let prepared =
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tool.prepare_arguments(&call.arguments))) {
            Ok(prepared) => prepared,
            Err(payload) => return Preparation::Immediate(boxed_error(pi_types::panic_message(payload.as_ref()))),
        };
    let arguments: &Map<String, Value> = prepared.as_ref().unwrap_or(&call.arguments);
    let args = match validate_tool_arguments(
        &call.name,
        tool.spec().validator(),
        arguments,
        call.arguments_error.as_deref(),
    ) {
        Ok(args) => args,
        Err(message) => return Preparation::Immediate(boxed_error(message)),
    };
    if let Some(before) = &hooks.before_tool_call {
        let ctx = BeforeToolCallContext { assistant_message: assistant, tool_call: call, args: &args, context };
        let decision = match catch_call(|| before(&ctx, cancel)).await {
            Ok(decision) => decision,
            Err(message) => return Preparation::Immediate(boxed_error(message)),
        };
        if cancel.is_cancelled() {
            return Preparation::Immediate(boxed_error(ABORTED));
        }
        if let Some(decision) = decision.filter(|d| d.block) {
            // JavaScript `||`: an empty reason gives the default text.
            let reason =
                decision.reason.filter(|r| !r.is_empty()).unwrap_or_else(|| "Tool execution was blocked".into());
            let mut result = error_result(reason);
            if decision.terminate == Some(true) {
                result.terminate = Some(true);
            }
            return Preparation::Immediate(Box::new(result));
        }
    }
    Preparation::Prepared { tool: Arc::clone(tool), args }
}

struct Executed {
    result: AgentToolResult,
    is_error: bool,
    duration_ms: u64,
}

impl Executed {
    /// The result as it stands, for a run without an `after_tool_call` hook.
    fn finish(self) -> Box<Finished> {
        Box::new(Finished { result: self.result, is_error: self.is_error, duration_ms: Some(self.duration_ms) })
    }
}

/// An update's emit: a future that borrows nothing (its turn in the emit order, then the
/// sink's delivery).
type UpdateEmit = BoxFuture<'static, Result<(), LoopError>>;

/// What starts an update's emit ([`UpdateDispatch`]).
trait EmitUpdate: Fn(AgentToolResult) -> UpdateEmit + Send + Sync + 'static {}

impl<D: Fn(AgentToolResult) -> UpdateEmit + Send + Sync + 'static> EmitUpdate for D {}

/// Tool progress updates, delivered while the tool runs.
///
/// The reference calls its listeners from inside the tool's `onUpdate`, so whatever a
/// listener does synchronously (an abort, say) is visible to the tool's very next statement,
/// even for a tool that never waits. The callback therefore starts each delivery at once and
/// polls it one step; a delivery that has to wait (an async listener, another emit in
/// progress) is finished by its [`Execution`] while the tool runs, and before the call
/// completes (the reference awaits every update before it finishes the call).
struct UpdateDispatch<D> {
    state: Mutex<DispatchState>,
    /// Starts an update's delivery (held inline: one allocation per call, not two).
    deliver: D,
}

#[derive(Default)]
struct DispatchState {
    accepting: bool,
    waker: Option<Waker>,
    pending: VecDeque<UpdateEmit>,
    failure: Option<LoopError>,
}

impl<D: EmitUpdate> UpdateDispatch<D> {
    fn state(&self) -> std::sync::MutexGuard<'_, DispatchState> {
        // A poisoned lock only means a listener panicked while we held it; the state is
        // still consistent (every field is written in one step).
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The tool's update callback.
    fn send(&self, update: AgentToolResult) {
        let waker = {
            let state = self.state();
            if !state.accepting {
                return;
            }
            state.waker.clone().unwrap_or_else(|| Waker::noop().clone())
        };
        let mut delivery = (self.deliver)(update);
        let step = delivery.as_mut().poll(&mut Context::from_waker(&waker));
        let mut state = self.state();
        match step {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(error)) => {
                state.failure.get_or_insert(error);
            }
            Poll::Pending => state.pending.push_back(delivery),
        }
    }

    /// Drive the deliveries that had to wait; ready when none is left.
    fn poll_pending(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut pending = {
            let mut state = self.state();
            state.waker = Some(cx.waker().clone());
            std::mem::take(&mut state.pending)
        };
        let mut failure = None;
        pending.retain_mut(|delivery| match delivery.as_mut().poll(cx) {
            Poll::Ready(result) => {
                if let Err(error) = result {
                    failure.get_or_insert(error);
                }
                false
            }
            Poll::Pending => true,
        });
        let mut state = self.state();
        if let Some(error) = failure {
            state.failure.get_or_insert(error);
        }
        // Deliveries started while these were polled come after them.
        pending.append(&mut state.pending);
        state.pending = pending;
        if state.pending.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    fn register(&self, cx: &Context<'_>) {
        self.state().waker = Some(cx.waker().clone());
    }

    fn stop_accepting(&self) {
        self.state().accepting = false;
    }

    fn take_failure(&self) -> Option<LoopError> {
        self.state().failure.take()
    }
}

/// Set a prepared call up to run: the tool's `execute` is called at the first poll of the
/// returned [`Execution`], which holds everything the call needs, so the futures that drive it
/// keep no place for its tool, arguments or callback.
fn start_execution<'a, D>(
    call: &'a ToolCall,
    tool: Arc<dyn AgentTool>,
    args: Value,
    cancel: &'a CancellationToken,
    deliver: D,
    yield_after_execute: bool,
) -> Execution<impl Future<Output = Result<AgentToolResult, String>> + Send + 'a, D>
where
    D: EmitUpdate,
{
    let dispatch = Arc::new(UpdateDispatch {
        state: Mutex::new(DispatchState { accepting: true, ..DispatchState::default() }),
        deliver,
    });
    let sender = Arc::clone(&dispatch);
    let callback: ToolUpdateFn = Arc::new(move |update| sender.send(update));
    let running = Box::pin(catch_tool(move || tool.execute(call.id.to_string(), args, cancel.clone(), callback)));
    Execution { running: Some(running), dispatch, started: None, outcome: None, yield_after_execute }
}

/// Run a tool's `execute` like [`catch_call`], but a panic (while building the future or
/// polling it) says that the tool panicked, so that neither the model nor the user takes the
/// panic's message for an error the tool reported. (The reference's tools throw; a Rust tool
/// that panics has a bug, which its result should name.)
async fn catch_tool<F, Fut>(call: F) -> Result<AgentToolResult, String>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<AgentToolResult, pi_types::BoxError>>,
{
    let panicked = |message: String| format!("The tool panicked: {message}");
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)) {
        Ok(future) => match pi_types::catch_panic(future).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(error.to_string()),
            Err(message) => Err(panicked(message)),
        },
        Err(payload) => Err(panicked(pi_types::panic_message(payload.as_ref()))),
    }
}

/// A call's execution as a future of its [`Executed`] result. Progress updates reach the sink
/// as they are made and are ignored once `execute` returned. With `yield_after_execute`, the
/// call gives way once when `execute` completes, as the reference's `await` does, so that
/// every call of a parallel batch starts before any of them goes on; then the updates still
/// being delivered are finished.
///
/// Written by hand rather than as an `async fn`: every call of a parallel batch waits at that
/// yield at once, and a generated future would keep room for its arguments and for the
/// tool's finished future beside the result.
struct Execution<F, D> {
    /// The tool's execution (boxed); dropped as soon as it returned.
    running: Option<std::pin::Pin<Box<F>>>,
    dispatch: Arc<UpdateDispatch<D>>,
    /// When the first poll called `execute`.
    started: Option<Instant>,
    /// What `execute` returned, and how long it took once the call went on.
    outcome: Option<(Result<AgentToolResult, String>, Option<u64>)>,
    yield_after_execute: bool,
}

impl<F, D> Future for Execution<F, D>
where
    F: Future<Output = Result<AgentToolResult, String>>,
    D: EmitUpdate,
{
    type Output = Result<Executed, LoopError>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Some(running) = &mut this.running {
            let started = *this.started.get_or_insert_with(Instant::now);
            this.dispatch.register(cx);
            let polled = running.as_mut().poll(cx);
            // Errors of updates are reported once the call completes, as the reference does.
            let _ = this.dispatch.poll_pending(cx);
            let Poll::Ready(result) = polled else { return Poll::Pending };
            this.running = None;
            if this.yield_after_execute {
                this.outcome = Some((result, None));
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            this.outcome = Some((result, Some(elapsed_ms(started))));
            this.dispatch.stop_accepting();
        }
        // Polled again after it finished (no caller does): it stays pending.
        let Some((_, duration_ms)) = &mut this.outcome else { return Poll::Pending };
        if duration_ms.is_none() {
            // Back from the yield.
            *duration_ms = Some(this.started.map_or(0, elapsed_ms));
            this.dispatch.stop_accepting();
        }
        std::task::ready!(this.dispatch.poll_pending(cx));
        if let Some(error) = this.dispatch.take_failure() {
            this.outcome = None;
            return Poll::Ready(Err(error));
        }
        let Some((result, duration_ms)) = this.outcome.take() else { return Poll::Pending };
        let duration_ms = duration_ms.unwrap_or(0);
        Poll::Ready(Ok(match result {
            Ok(result) => {
                let is_error = result.is_error == Some(true);
                Executed { result, is_error, duration_ms }
            }
            Err(message) => Executed { result: error_result(message), is_error: true, duration_ms },
        }))
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    (started.elapsed().as_secs_f64() * 1000.0).round() as u64
}

async fn finalize(
    context: &AgentContext,
    assistant: &AssistantMessage,
    call: &ToolCall,
    args: &Value,
    executed: Executed,
    hooks: &HookFns,
    cancel: &CancellationToken,
) -> Box<Finished> {
    let Executed { mut result, mut is_error, duration_ms } = executed;
    if let Some(after) = &hooks.after_tool_call {
        let ctx = AfterToolCallContext {
            assistant_message: assistant,
            tool_call: call,
            args,
            result: &result,
            is_error,
            context,
        };
        match catch_call(|| after(&ctx, cancel)).await {
            Ok(Some(overrides)) => {
                // `??` semantics: absent or JSON null keeps the executed value.
                let structured = overrides
                    .structured_content
                    .filter(|v| !v.is_null())
                    .or(if overrides.content.is_some() { None } else { result.structured_content.take() });
                // The reference spreads the executed result, so its other members stay.
                if let Some(content) = overrides.content {
                    result.content = content;
                }
                if let Some(details) = overrides.details.filter(|v| !v.is_null()) {
                    result.details = Some(details);
                }
                result.structured_content = structured;
                if let Some(usage) = overrides.usage {
                    result.usage = Some(Box::new(usage));
                }
                if let Some(terminate) = overrides.terminate {
                    result.terminate = Some(terminate);
                    result.extra.shift_remove("terminate");
                }
                is_error = overrides.is_error.unwrap_or(is_error);
            }
            Ok(None) => {}
            Err(message) => {
                result = error_result(message);
                is_error = true;
            }
        }
    }
    Box::new(Finished { result, is_error, duration_ms: Some(duration_ms) })
}

fn update_event(call: &ToolCall, partial_result: AgentToolResult) -> AgentEvent {
    AgentEvent::ToolExecutionUpdate {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        args: raw_args(call),
        partial_result: Box::new(partial_result),
    }
}

fn start_event(call: &ToolCall) -> AgentEvent {
    AgentEvent::ToolExecutionStart { tool_call_id: call.id.clone(), tool_name: call.name.clone(), args: raw_args(call) }
}

fn end_event(call: &ToolCall, outcome: &Finished) -> AgentEvent {
    AgentEvent::ToolExecutionEnd {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        result: Box::new(outcome.result.clone()),
        is_error: outcome.is_error,
        duration_ms: outcome.duration_ms,
    }
}

fn result_message(call: &ToolCall, outcome: &Finished) -> Arc<ToolResultMessage> {
    Arc::new(ToolResultMessage {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        content: outcome.result.content.clone(),
        details: outcome.result.details.clone(),
        usage: outcome.result.usage.clone(),
        nested_calls: None,
        is_error: outcome.is_error,
        timestamp: pi_types::now_ms(),
        duration_ms: outcome.duration_ms,
    })
}

/// Emit the result's start and end with one shared message, which the batch keeps.
async fn emit_result_message(
    message: Arc<ToolResultMessage>,
    emitter: &Emitter,
) -> Result<Arc<ToolResultMessage>, LoopError> {
    emitter.emit(AgentEvent::MessageStart { message: AgentMessage::ToolResult(Arc::clone(&message)) }).await?;
    emitter.emit(AgentEvent::MessageEnd { message: AgentMessage::ToolResult(Arc::clone(&message)) }).await?;
    Ok(message)
}

fn terminates(outcomes: &[Box<Finished>]) -> bool {
    !outcomes.is_empty() && outcomes.iter().all(|o| o.result.terminate == Some(true))
}

/// A `length` stop: every call may carry truncated arguments, so none runs.
pub(crate) async fn fail_truncated_tool_calls(
    assistant: &AssistantMessage,
    emitter: &Emitter,
    trace: ToolTrace<'_>,
) -> Result<ToolBatch, LoopError> {
    let mut messages = Vec::new();
    for call in assistant.tool_calls() {
        let span = trace.span(call);
        emitter.emit(start_event(call)).await?;
        let text = format!(
            "Tool call \"{}\" was not executed: the response hit the output token limit, so its arguments may be truncated. Re-issue the tool call with complete arguments.",
            call.name
        );
        let outcome = Finished::immediate(error_result(text));
        trace.end(&span, &outcome);
        drop(span);
        emitter.emit(end_event(call, &outcome)).await?;
        messages.push(emit_result_message(result_message(call, &outcome), emitter).await?);
    }
    Ok(ToolBatch { messages, terminate: false })
}

pub(crate) async fn execute_tool_calls(
    context: &AgentContext,
    assistant: &Arc<AssistantMessage>,
    mode: ToolExecutionMode,
    hooks: &HookFns,
    cancel: &CancellationToken,
    emitter: &Emitter,
    trace: ToolTrace<'_>,
) -> Result<ToolBatch, LoopError> {
    let calls: Vec<&ToolCall> = assistant.tool_calls().collect();
    let any_sequential = calls
        .iter()
        .any(|c| context.tool(&c.name).is_some_and(|t| t.spec().execution_mode == Some(ToolExecutionMode::Sequential)));
    if mode == ToolExecutionMode::Sequential || any_sequential {
        // Boxed: its future (a whole call's execution inline) would otherwise size every batch's.
        let batch = Batch { context, assistant, hooks, cancel, emitter, parallel: false, trace };
        Box::pin(execute_sequential(&batch, &calls)).await
    } else {
        let batch = Batch { context, assistant, hooks, cancel, emitter, parallel: true, trace };
        execute_parallel(&batch, &calls).await
    }
}

/// What every call of one batch shares.
struct Batch<'a> {
    context: &'a AgentContext,
    assistant: &'a Arc<AssistantMessage>,
    hooks: &'a HookFns,
    cancel: &'a CancellationToken,
    emitter: &'a Emitter,
    /// Whether calls run concurrently (parallel mode).
    parallel: bool,
    trace: ToolTrace<'a>,
}

impl Batch<'_> {
    /// The first phase of a parallel batch: each call's `tool_execution_start`, then its
    /// preparation (a call that fails it ends at once).
    async fn prepare_all(&self, calls: &[&ToolCall]) -> Result<Vec<Slot>, LoopError> {
        let mut slots = Vec::with_capacity(calls.len());
        for call in calls {
            let span = self.trace.span(call);
            self.emitter.emit(start_event(call)).await?;
            // Polled in the call's span, as the execution is: what its hooks trace is the call's.
            let preparation = InSpan::new(
                span.as_deref(),
                prepare(self.context, &self.context.tools, self.assistant, call, self.hooks, self.cancel),
            )
            .await;
            match preparation {
                Preparation::Immediate(result) => {
                    let outcome = Finished::immediate(*result);
                    self.trace.end(&span, &outcome);
                    drop(span);
                    self.emitter.emit(end_event(call, &outcome)).await?;
                    slots.push(Slot::Done(outcome));
                }
                Preparation::Prepared { tool, args } => slots.push(Slot::Run(tool, args, span)),
            }
        }
        Ok(slots)
    }

    /// Set a prepared call up to run (see [`start_execution`]), without awaiting anything:
    /// the futures that then drive it keep no place for its tool and arguments.
    fn start_call<'a>(
        &self,
        call: &'a ToolCall,
        tool: Arc<dyn AgentTool>,
        args: Value,
    ) -> StartedCall<impl Future<Output = Result<AgentToolResult, String>> + Send + 'a, impl EmitUpdate>
    where
        Self: 'a,
    {
        let emitter = self.emitter.detached();
        let kept = KeptCall::new(self.assistant, call);
        let deliver = move |update| match kept.get() {
            Some(call) => emitter.emit(update_event(call, update)),
            None => Box::pin(std::future::ready(Ok(()))) as UpdateEmit,
        };
        // Only the hook needs the arguments afterwards (boxed: rare, and large).
        let hook_args = self.hooks.after_tool_call.is_some().then(|| Box::new(args.clone()));
        StartedCall { execution: start_execution(call, tool, args, self.cancel, deliver, self.parallel), hook_args }
    }

    /// An executed call's outcome: as it stands, or after its `after_tool_call` hook when
    /// the call has one (boxed: the hook's future would otherwise size every call's).
    fn finish<'s>(
        &'s self,
        call: &'s ToolCall,
        executed: Executed,
        hook_args: Option<Box<Value>>,
    ) -> Either<std::future::Ready<Box<Finished>>, BoxFuture<'s, Box<Finished>>> {
        match hook_args {
            None => Either::Left(std::future::ready(executed.finish())),
            Some(args) => Either::Right(Box::pin(async move {
                finalize(self.context, self.assistant, call, &args, executed, self.hooks, self.cancel).await
            })),
        }
    }
}

/// A batch's call set up to run ([`Batch::start_call`]).
struct StartedCall<F, D> {
    execution: Execution<F, D>,
    /// The arguments the tool was given, when an `after_tool_call` hook will read them.
    hook_args: Option<Box<Value>>,
}

/// A tool call kept by an update callback, which may outlive its batch: the shared assistant
/// message and the call's place in it, so no execution copies its call.
enum KeptCall {
    InMessage(Arc<AssistantMessage>, usize),
    /// A call that is not one of the message's blocks.
    Copied(Box<ToolCall>),
}

impl KeptCall {
    fn new(message: &Arc<AssistantMessage>, call: &ToolCall) -> Self {
        let is_call =
            |block: &AssistantContent| matches!(block, AssistantContent::ToolCall(c) if std::ptr::eq(c, call));
        match message.content.iter().position(is_call) {
            Some(index) => Self::InMessage(Arc::clone(message), index),
            None => Self::Copied(Box::new(call.clone())),
        }
    }

    fn get(&self) -> Option<&ToolCall> {
        match self {
            Self::InMessage(message, index) => match message.content.get(*index) {
                Some(AssistantContent::ToolCall(call)) => Some(call),
                _ => None,
            },
            Self::Copied(call) => Some(call),
        }
    }
}

async fn execute_sequential(batch: &Batch<'_>, calls: &[&ToolCall]) -> Result<ToolBatch, LoopError> {
    let Batch { context, assistant, hooks, cancel, emitter, .. } = *batch;
    let mut outcomes = Vec::new();
    let mut messages = Vec::new();
    for call in calls {
        let span = batch.trace.span(call);
        emitter.emit(start_event(call)).await?;
        let outcome = InSpan::new(span.as_deref(), async {
            match prepare(context, &context.tools, assistant, call, hooks, cancel).await {
                Preparation::Immediate(result) => Ok(Finished::immediate(*result)),
                Preparation::Prepared { tool, args } => {
                    let mut started = batch.start_call(call, tool, args);
                    let executed = (&mut started.execution).await?;
                    Ok(batch.finish(call, executed, started.hook_args).await)
                }
            }
        })
        .await?;
        batch.trace.end(&span, &outcome);
        drop(span);
        emitter.emit(end_event(call, &outcome)).await?;
        messages.push(emit_result_message(result_message(call, &outcome), emitter).await?);
        outcomes.push(outcome);
    }
    Ok(ToolBatch { messages, terminate: terminates(&outcomes) })
}

async fn execute_parallel(batch: &Batch<'_>, calls: &[&ToolCall]) -> Result<ToolBatch, LoopError> {
    let emitter = batch.emitter;
    // Boxed, this phase and the last: every call of the batch waits in this future (at the
    // yield after its execution), so it holds no state of the steps before and after.
    let slots = Box::pin(batch.prepare_all(calls)).await?;
    // Polled in source order on this task, each call giving way once its `execute` is done:
    // every call starts before any goes on (the reference starts them all at once), and
    // `tool_execution_end` follows completion order.
    let runs = slots.into_iter().zip(calls).map(|(slot, call)| match slot {
        Slot::Done(outcome) => Either::Left(std::future::ready(Ok(outcome))),
        Slot::Run(tool, args, span) => {
            Either::Right(batch.run_parallel_call(call, batch.start_call(call, tool, args), span))
        }
    });
    let outcomes: Vec<Box<Finished>> = futures::future::try_join_all(runs).await?;
    Box::pin(emit_result_messages(&outcomes, calls, emitter)).await
}

impl Batch<'_> {
    /// One started call of a parallel batch, from its execution to its `tool_execution_end`.
    ///
    /// Every call of the batch waits in this future at once (at the yield after its
    /// execution), so it keeps the call's state in one place: an `async` block uses what it
    /// captured where it is, where an `async fn` would copy its arguments into locals and keep
    /// both; and its end event's emit is on the heap, not beside that state.
    #[allow(clippy::manual_async_fn)]
    fn run_parallel_call<'s, F, D>(
        &'s self,
        call: &'s ToolCall,
        mut started: StartedCall<F, D>,
        span: LiveSpan,
    ) -> impl Future<Output = Result<Box<Finished>, LoopError>> + 's
    where
        F: Future<Output = Result<AgentToolResult, String>> + 's,
        D: EmitUpdate,
    {
        async move {
            let outcome = if self.cancel.is_cancelled() {
                // Never polled: the tool's `execute` is not called.
                drop(started);
                Finished::immediate(error_result(ABORTED))
            } else {
                let executed = InSpan::new(span.as_deref(), &mut started.execution).await?;
                InSpan::new(span.as_deref(), self.finish(call, executed, started.hook_args.take())).await
            };
            self.trace.end(&span, &outcome);
            drop(span);
            self.emitter.emit_boxed(end_event(call, &outcome)).await?;
            Ok(outcome)
        }
    }
}

/// A parallel batch's call once prepared: its outcome, or what it runs with.
enum Slot {
    Done(Box<Finished>),
    /// The tool, its arguments and the call's span.
    Run(Arc<dyn AgentTool>, Value, LiveSpan),
}

/// The last phase of a parallel batch: the result messages, in call order.
async fn emit_result_messages(
    outcomes: &[Box<Finished>],
    calls: &[&ToolCall],
    emitter: &Emitter,
) -> Result<ToolBatch, LoopError> {
    let mut messages = Vec::with_capacity(outcomes.len());
    for (outcome, call) in outcomes.iter().zip(calls) {
        messages.push(emit_result_message(result_message(call, outcome), emitter).await?);
    }
    Ok(ToolBatch { messages, terminate: terminates(outcomes) })
}

/// Options of [`run_tool_call`].
#[derive(Clone)]
pub struct RunToolCallOptions {
    /// The assistant message the call belongs to.
    pub assistant_message: AssistantMessage,
    /// The context the hooks see.
    pub context: AgentContext,
    /// Tools to look the call up in (default: the context's).
    pub tools: Option<Vec<Arc<dyn AgentTool>>>,
    /// The `before_tool_call` and `after_tool_call` hooks (the others are not called).
    pub hooks: Hooks,
    /// Cancellation, checked first.
    pub cancel: CancellationToken,
    /// Progress updates.
    pub on_update: Option<ToolUpdateFn>,
}

/// Run one tool call through the whole pipeline a model-issued call goes through
/// (preparation, validation, `before_tool_call`, execution, `after_tool_call`) without
/// events or messages. Never fails: every problem is an error outcome.
pub async fn run_tool_call(tool_call: &ToolCall, options: RunToolCallOptions) -> ToolCallOutcome {
    // Under the caller's current span; no content (there is no run configuration to opt in).
    let span = tool_span(Some(&Span::current()), tool_call, false);
    let outcome = InSpan::new(span.as_deref(), run_tool_call_in_span(tool_call, options)).await;
    end_tool(span.as_deref(), &outcome.result, outcome.is_error, false);
    outcome
}

async fn run_tool_call_in_span(tool_call: &ToolCall, options: RunToolCallOptions) -> ToolCallOutcome {
    let hooks = options.hooks.fns();
    let tools = options.tools.as_deref().unwrap_or(&options.context.tools);
    let preparation =
        prepare(&options.context, tools, &options.assistant_message, tool_call, hooks, &options.cancel).await;
    let (tool, args) = match preparation {
        Preparation::Immediate(result) => return Finished::immediate(*result).into_outcome(tool_call),
        Preparation::Prepared { tool, args } => (tool, args),
    };
    // Only the `after_tool_call` hook reads the arguments once the tool took them.
    let hook_args = if hooks.after_tool_call.is_some() { args.clone() } else { Value::Null };
    let forward = options.on_update.clone();
    let deliver = move |update: AgentToolResult| -> UpdateEmit {
        if let Some(forward) = &forward {
            forward(update);
        }
        Box::pin(std::future::ready(Ok(())))
    };
    let executed = match start_execution(tool_call, tool, args, &options.cancel, deliver, false).await {
        Ok(executed) => executed,
        Err(error) => Executed { result: error_result(error.to_string()), is_error: true, duration_ms: 0 },
    };
    finalize(&options.context, &options.assistant_message, tool_call, &hook_args, executed, hooks, &options.cancel)
        .await
        .into_outcome(tool_call)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_types::{FnTool, Tool, ToolSpec};

    /// Every call of a parallel batch waits in this future at once, so its size is memory per
    /// concurrent call (and per agent in the `agents` workload): a large value held across an
    /// `await`, or a copy of what the future was given, shows up here as a failing test.
    #[test]
    fn a_parallel_call_future_stays_small() {
        let (context, assistant, hooks) =
            (AgentContext::default(), Arc::new(AssistantMessage::default()), Hooks::new());
        let (cancel, emitter) =
            (CancellationToken::new(), Emitter::new(crate::sink::EventTarget::Sink(Arc::new(crate::NullSink))));
        let trace = ToolTrace { parent: None, record_content: false };
        let batch = Batch {
            context: &context,
            assistant: &assistant,
            hooks: hooks.fns(),
            cancel: &cancel,
            emitter: &emitter,
            parallel: true,
            trace,
        };
        let spec = ToolSpec::new(Tool::new("t", "", serde_json::json!({"type": "object"}))).expect("a valid spec");
        let tool: Arc<dyn AgentTool> =
            Arc::new(FnTool::new(spec, |_args: Value, _ctx| async { Ok(AgentToolResult::text("ok")) }));
        let call = ToolCall::default();
        let execution = start_execution(
            &call,
            Arc::clone(&tool),
            Value::Null,
            &cancel,
            |_| -> UpdateEmit { Box::pin(std::future::ready(Ok(()))) },
            true,
        );
        // The result (256 bytes) and what drives the call around it.
        assert!(
            std::mem::size_of_val(&execution) <= 320,
            "an execution is {} bytes",
            std::mem::size_of_val(&execution)
        );
        let run = batch.run_parallel_call(&call, batch.start_call(&call, tool, Value::Null), None);
        // 568 bytes while the call's future kept its arguments and the tool's future beside its
        // result, and emitted its end event inline.
        let size = std::mem::size_of_val(&run);
        assert!(size <= 384, "a parallel call's future is {size} bytes");
    }
}
