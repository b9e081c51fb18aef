//! Where a run's events go.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use pi_types::{AgentEvent, BoxError};

use crate::emit_order::EmitOrder;

/// Receives every event of a run, awaited one at a time.
///
/// The loop waits for `emit` before it goes on, so a sink sees each event while it is
/// current (the shared partial message in `message_update` is the message right after that
/// event). Returning `Err` makes the run fail with that error, like a throwing listener.
///
/// A sink that handles the event at once returns [`EmitFuture::done`] (no allocation per
/// event); one that awaits returns [`EmitFuture::boxed`].
pub trait AgentEventSink: Send + Sync {
    /// Handle one event.
    fn emit<'a>(&'a self, event: &'a AgentEvent) -> EmitFuture<'a>;

    /// Handle a `message_update`, told whether the partial's fields other than `content` may
    /// differ from the previous update's
    /// ([`AssistantMessageEventStream::metadata_changed`](pi_types::AssistantMessageEventStream::metadata_changed)):
    /// a sink that keeps its own copy of the streaming message need not compare them when they
    /// did not change. The loop delivers every `message_update` through this method; the
    /// default ignores the hint and calls [`emit`](Self::emit).
    fn emit_update<'a>(&'a self, event: &'a AgentEvent, metadata_changed: bool) -> EmitFuture<'a> {
        let _ = metadata_changed;
        self.emit(event)
    }

    /// Whether this sink takes a streamed response's `message_update`s by value through
    /// [`deliver_update`](Self::deliver_update). The loop then has the provider push them from
    /// inside its sends (see [`pi_types::push`]) instead of pulling one event per delta. `false`
    /// by default.
    fn delivers_updates(&self) -> bool {
        false
    }

    /// Handle a `message_update` given by value, as [`emit_update`](Self::emit_update) handles a
    /// lent one; called only when [`delivers_updates`](Self::delivers_updates) says so. A sink
    /// that answers asynchronously returns a future that owns what it needs. The default serves a
    /// sink whose `emit_update` always answers at once: it reports an asynchronous answer as an
    /// error.
    fn deliver_update(&self, event: AgentEvent, metadata_changed: bool) -> UpdateDelivery {
        match self.emit_update(&event, metadata_changed) {
            EmitFuture::Ready(outcome) => UpdateDelivery::Done(outcome.unwrap_or(Ok(()))),
            EmitFuture::Boxed(_) => UpdateDelivery::Done(Err(
                "this sink answered a message_update asynchronously: it must implement deliver_update".into(),
            )),
        }
    }
}

/// What [`AgentEventSink::deliver_update`] did with an update.
#[must_use = "the loop awaits the outcome"]
pub enum UpdateDelivery {
    /// Handled at once, with this outcome.
    Done(Result<(), BoxError>),
    /// Being handled by this future, which owns the update.
    Pending(BoxFuture<'static, Result<(), BoxError>>),
}

impl std::fmt::Debug for UpdateDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Done(outcome) => f.debug_tuple("Done").field(outcome).finish(),
            Self::Pending(_) => f.write_str("Pending(..)"),
        }
    }
}

/// What [`AgentEventSink::emit`] returns: an outcome known at once, or a future for it.
#[must_use = "the loop awaits the outcome"]
pub enum EmitFuture<'a> {
    /// Handled synchronously (taken on the first poll).
    Ready(Option<Result<(), BoxError>>),
    /// Handled asynchronously.
    Boxed(BoxFuture<'a, Result<(), BoxError>>),
}

impl<'a> EmitFuture<'a> {
    /// The event was handled.
    pub fn done() -> Self {
        Self::Ready(Some(Ok(())))
    }

    /// The event was handled with this outcome.
    pub fn ready(outcome: Result<(), BoxError>) -> Self {
        Self::Ready(Some(outcome))
    }

    /// The event is handled by this future.
    pub fn boxed(future: impl Future<Output = Result<(), BoxError>> + Send + 'a) -> Self {
        Self::Boxed(Box::pin(future))
    }
}

impl<'a> From<BoxFuture<'a, Result<(), BoxError>>> for EmitFuture<'a> {
    fn from(future: BoxFuture<'a, Result<(), BoxError>>) -> Self {
        Self::Boxed(future)
    }
}

impl Future for EmitFuture<'_> {
    type Output = Result<(), BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            // Polled again after completion: the outcome was taken, report success.
            Self::Ready(outcome) => Poll::Ready(outcome.take().unwrap_or(Ok(()))),
            Self::Boxed(future) => future.as_mut().poll(cx),
        }
    }
}

impl std::fmt::Debug for EmitFuture<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ready(outcome) => f.debug_tuple("Ready").field(outcome).finish(),
            Self::Boxed(_) => f.write_str("Boxed(..)"),
        }
    }
}

/// A synchronous closure sink: `|event| { ... }`.
pub struct FnSink<F>(pub F);

impl<F> AgentEventSink for FnSink<F>
where
    F: Fn(&AgentEvent) + Send + Sync,
{
    fn emit<'a>(&'a self, event: &'a AgentEvent) -> EmitFuture<'a> {
        (self.0)(event);
        EmitFuture::done()
    }

    fn delivers_updates(&self) -> bool {
        true
    }
}

/// A sink that drops every event.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullSink;

impl AgentEventSink for NullSink {
    fn emit<'a>(&'a self, _event: &'a AgentEvent) -> EmitFuture<'a> {
        EmitFuture::done()
    }

    fn delivers_updates(&self) -> bool {
        true
    }
}

/// Where a run's events go: a sink, which each event is lent to, or the `Stream` form's
/// handoff slot, which each event is given to (moved, not copied).
#[derive(Clone)]
pub(crate) enum Target {
    Sink(Arc<dyn AgentEventSink>),
    Handoff(Arc<crate::stream::Handoff>),
}

/// Serializes emits: concurrently running tools never call the user's sink at the same time.
///
/// The target is shared (`Arc`) because tool progress updates are handed to it from inside
/// the tool's own update callback, which may outlive any borrow the loop holds.
#[derive(Clone)]
pub(crate) struct Emitter {
    target: Target,
    order: Arc<EmitOrder>,
}

impl Emitter {
    pub(crate) fn new(target: Target) -> Self {
        Self { target, order: Arc::default() }
    }

    /// Emit in turn.
    ///
    /// A `message_update` is the exception: only the loop emits it, while a response streams,
    /// and then the loop is the only emitter (no tool runs, and every update of the last tool
    /// batch was delivered before its call completed; later ones are refused). So its turn is
    /// taken only if somebody holds it, which that rules out: one load per delta instead of two
    /// atomic operations.
    pub(crate) fn emit(
        &self,
        emission: impl Into<Emission>,
    ) -> impl Future<Output = Result<(), crate::LoopError>> + Send + '_ {
        let Emission { event, metadata_changed } = emission.into();
        // An `async` block, not an `async fn`: the parameters of an `async fn` are moved into
        // locals of its body, which would store the event twice in every future that emits.
        async move {
            let alone = matches!(event, AgentEvent::MessageUpdate { .. }) && self.order.is_free();
            let _turn = match alone {
                true => None,
                false => Some(self.order.lock().await),
            };
            match &self.target {
                Target::Sink(sink) => match start_delivery(&**sink, &event, metadata_changed) {
                    Delivery::Handled(outcome) => outcome,
                    Delivery::Pending(future) => finish_delivery(future).await,
                },
                Target::Handoff(handoff) => {
                    handoff.give(event, alone).await;
                    Ok(())
                }
            }
        }
    }

    /// [`emit`](Self::emit) with its future on the heap, for the few events of a turn (its
    /// start and end, the prompts, the end of the run) emitted by the futures every run holds
    /// while it waits: held inline, an emit's state (the event and the sink's future) would
    /// take its room in them for the whole run. A `message_update` is never emitted this way.
    pub(crate) fn emit_boxed(
        &self,
        emission: impl Into<Emission>,
    ) -> futures::future::BoxFuture<'_, Result<(), crate::LoopError>> {
        Box::pin(self.emit(emission))
    }

    /// A consumer that delivers a streamed response's updates as the provider sends them, when
    /// the target is a sink that takes updates by value or the `Stream` form's handoff (see
    /// [`crate::push`]).
    pub(crate) fn push_delivery(&self) -> Option<Arc<crate::push::PushDelivery>> {
        use crate::push::{Destination, PushDelivery};
        let destination = match &self.target {
            Target::Sink(sink) if sink.delivers_updates() => Destination::Sink(Arc::clone(sink)),
            Target::Handoff(handoff) => Destination::Handoff(Arc::clone(handoff)),
            Target::Sink(_) => return None,
        };
        Some(Arc::new(PushDelivery::new(destination, Arc::clone(&self.order))))
    }

    /// A handle whose emits borrow nothing, for deliveries started outside the loop's own
    /// futures (a tool's update callback). They share this emitter's order.
    pub(crate) fn detached(&self) -> DetachedEmitter {
        DetachedEmitter(self.clone())
    }
}

/// See [`Emitter::detached`].
pub(crate) struct DetachedEmitter(Emitter);

impl DetachedEmitter {
    /// Emit; the future takes its place in the emit order when first polled.
    pub(crate) fn emit(&self, event: AgentEvent) -> BoxFuture<'static, Result<(), crate::LoopError>> {
        let emitter = self.0.clone();
        Box::pin(async move { emitter.emit(event).await })
    }
}

/// An event to emit, with what its emitter knows about it.
pub(crate) struct Emission {
    event: AgentEvent,
    /// For a `message_update`: see [`AgentEventSink::emit_update`].
    metadata_changed: bool,
}

impl Emission {
    /// A `message_update` of a stream that reports whether its metadata changed.
    pub(crate) fn update(event: AgentEvent, metadata_changed: bool) -> Self {
        Self { event, metadata_changed }
    }
}

impl From<AgentEvent> for Emission {
    fn from(event: AgentEvent) -> Self {
        Self { event, metadata_changed: true }
    }
}

/// How far [`start_delivery`] got.
enum Delivery<'a> {
    /// The sink handled the event at once (the common case): no future to poll.
    Handled(Result<(), crate::LoopError>),
    /// The sink handles it in this future.
    Pending(EmitFuture<'a>),
}

/// Hand one event to the sink; a sink error or panic becomes [`crate::LoopError::Sink`]. A
/// plain function, so that an event the sink handles at once costs no future of its own.
fn start_delivery<'a>(sink: &'a dyn AgentEventSink, event: &'a AgentEvent, metadata_changed: bool) -> Delivery<'a> {
    let handle = || match event {
        AgentEvent::MessageUpdate { .. } => sink.emit_update(event, metadata_changed),
        _ => sink.emit(event),
    };
    match std::panic::catch_unwind(AssertUnwindSafe(handle)) {
        Ok(EmitFuture::Ready(outcome)) => {
            Delivery::Handled(outcome.unwrap_or(Ok(())).map_err(|error| crate::LoopError::Sink(error.to_string())))
        }
        Ok(future) => Delivery::Pending(future),
        Err(payload) => {
            Delivery::Handled(Err(crate::LoopError::Sink(pi_types::error::panic_message(payload.as_ref()))))
        }
    }
}

/// The rest of a delivery the sink handles asynchronously: its error or panic becomes
/// [`crate::LoopError::Sink`]. Combinators, not an `async fn`, so that every emit's future
/// holds the sink's future once (an `async fn` would store it as its argument and again as
/// the future it awaits).
fn finish_delivery(future: EmitFuture<'_>) -> impl Future<Output = Result<(), crate::LoopError>> + Send + '_ {
    use futures::FutureExt;
    AssertUnwindSafe(future).catch_unwind().map(|outcome| match outcome {
        Ok(outcome) => outcome.map_err(|error| crate::LoopError::Sink(error.to_string())),
        Err(payload) => Err(crate::LoopError::Sink(pi_types::error::panic_message(payload.as_ref()))),
    })
}
