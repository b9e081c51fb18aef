//! Where a run's events go: one sink method, one delivery path.
//!
//! # Protocol
//! Every event of a run reaches its sink once, by value, through
//! [`AgentEventSink::deliver`], with an [`EventInfo`] saying what the loop knows about it. The
//! run waits for the delivery before it goes on: a sink sees each event while it is current
//! (the partial message in a `message_update` is the message right after that event), and an
//! error fails the run, like a throwing listener.
//!
//! The loop's own events are delivered by the loop ([`Emitter`]); a streamed response's
//! `message_update`s are delivered from inside the provider's send, as the provider makes them
//! (see `crate::push`). Both go through the same [`Emitter::deliver`]. The `Stream` form is
//! one more sink: its handoff slot ([`crate::stream`]).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::FutureExt;
use pi_types::{AgentEvent, BoxError};

use crate::emit_order::EmitOrder;
use crate::handoff::{Handoff, Taken};
use crate::LoopError;

/// Receives every event of a run, one at a time, by value (see docs/architecture.md, "one
/// delivery path"): the run waits for each delivery, and an error fails the run.
///
/// A sink that handles the event at once returns [`Delivery::done`] (no allocation per
/// event); one that awaits returns [`Delivery::pending`] with a future that owns what it needs.
///
/// ```
/// use pi_loop::{AgentEventSink, Delivery, EventInfo};
/// use pi_types::AgentEvent;
///
/// struct Printer;
///
/// impl AgentEventSink for Printer {
///     fn deliver(&self, event: AgentEvent, _info: EventInfo) -> Delivery {
///         println!("{}", event.type_name());
///         Delivery::done()
///     }
/// }
/// ```
pub trait AgentEventSink: Send + Sync {
    /// Handle one event.
    fn deliver(&self, event: AgentEvent, info: EventInfo) -> Delivery;
}

/// What the loop knows about an event it delivers.
#[derive(Clone, Copy, Debug)]
pub struct EventInfo {
    metadata_changed: bool,
    /// The loop itself awaits this delivery (a streamed update): a handoff then needs no waker
    /// (see [`crate::stream`]).
    awaited_directly: bool,
}

impl EventInfo {
    /// For a `message_update`: whether the partial's fields other than `content` may differ
    /// from the previous update's
    /// ([`AssistantMessageEventStream::metadata_changed`](pi_types::AssistantMessageEventStream::metadata_changed)).
    /// A sink that keeps its own copy of the streaming message (a
    /// [`StreamFollower`](pi_types::StreamFollower)) need not compare them when they did not change.
    /// `true` for every other event.
    pub fn metadata_changed(&self) -> bool {
        self.metadata_changed
    }

    pub(crate) const EVENT: Self = Self { metadata_changed: true, awaited_directly: false };

    pub(crate) fn update(metadata_changed: bool) -> Self {
        Self { metadata_changed, awaited_directly: true }
    }

    pub(crate) fn awaited_directly(&self) -> bool {
        self.awaited_directly
    }
}

/// What [`AgentEventSink::deliver`] did with an event: handled, or being handled.
#[must_use = "the loop awaits the outcome"]
pub struct Delivery(State);

enum State {
    Done(Result<(), BoxError>),
    Pending(BoxFuture<'static, Result<(), BoxError>>),
    /// In the `Stream` form's handoff until the consumer takes it.
    Handed(Taken),
}

impl Delivery {
    /// The event was handled.
    pub fn done() -> Self {
        Self(State::Done(Ok(())))
    }

    /// The event was handled with this outcome.
    pub fn ready(outcome: Result<(), BoxError>) -> Self {
        Self(State::Done(outcome))
    }

    /// The event is handled by this future.
    pub fn pending(future: impl Future<Output = Result<(), BoxError>> + Send + 'static) -> Self {
        Self(State::Pending(Box::pin(future)))
    }

    pub(crate) fn handed(taken: Taken) -> Self {
        Self(State::Handed(taken))
    }
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            State::Done(outcome) => f.debug_tuple("Done").field(outcome).finish(),
            State::Pending(_) | State::Handed(_) => f.write_str("Pending(..)"),
        }
    }
}

/// A delivery the sink did not finish at once; its error or panic becomes [`LoopError::Sink`].
pub(crate) struct Unfinished(State);

impl Unfinished {
    /// A delivery done once the run was polled again, for a caller that awaits
    /// [`Delivered::AfterYield`].
    pub(crate) fn after_yield() -> Self {
        Unfinished(State::Handed(Taken::Directly { polled: false }))
    }
}

impl Future for Unfinished {
    type Output = Result<(), LoopError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let polled = match &mut self.get_mut().0 {
            State::Done(outcome) => return Poll::Ready(sink_outcome(std::mem::replace(outcome, Ok(())))),
            State::Handed(taken) => return taken.poll_unpin(cx).map(Ok),
            State::Pending(future) => std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))),
        };
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(outcome)) => Poll::Ready(sink_outcome(outcome)),
            Err(payload) => Poll::Ready(Err(LoopError::Sink(pi_types::panic_message(payload.as_ref())))),
        }
    }
}

// Inlined: the `Ok` of every event's delivery is then a test, not a call.
#[inline(always)]
fn sink_outcome(outcome: Result<(), BoxError>) -> Result<(), LoopError> {
    match outcome {
        Ok(()) => Ok(()),
        Err(error) => Err(sink_error(error)),
    }
}

#[cold]
fn sink_error(error: BoxError) -> LoopError {
    LoopError::Sink(error.to_string())
}

/// How far [`Emitter::deliver`] got.
pub(crate) enum Delivered {
    /// Handled at once (the common case): no future to poll.
    Now(Result<(), LoopError>),
    /// Done once the run was polled again (see `Taken::Directly`): a caller that yields once
    /// need not keep a future for it.
    AfterYield,
    /// Being handled by this future.
    Later(Unfinished),
}

/// A synchronous closure sink: `|event| { ... }`.
pub struct FnSink<F>(pub F);

impl<F> AgentEventSink for FnSink<F>
where
    F: Fn(&AgentEvent) + Send + Sync,
{
    fn deliver(&self, event: AgentEvent, _info: EventInfo) -> Delivery {
        (self.0)(&event);
        Delivery::done()
    }
}

/// A sink that drops every event.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullSink;

impl AgentEventSink for NullSink {
    fn deliver(&self, _event: AgentEvent, _info: EventInfo) -> Delivery {
        Delivery::done()
    }
}

impl AgentEventSink for Handoff {
    fn deliver(&self, event: AgentEvent, info: EventInfo) -> Delivery {
        // An `Arc<Handoff>` is what the run holds; the handed-out `Taken` looks at the slot.
        Delivery::handed(self.give(event, info.awaited_directly()))
    }
}

/// Delivers a run's events in turn: concurrently running tools never call the sink at the
/// same time.
///
/// The sink is shared (`Arc`) because tool progress updates are delivered from inside the
/// tool's own update callback, and streamed updates from inside the provider's send, both of
/// which may outlive any borrow the loop holds.
#[derive(Clone)]
pub(crate) struct Emitter {
    target: EventTarget,
    order: Arc<EmitOrder>,
}

/// The sink a run delivers to: a caller's, or the `Stream` form's slot. The slot is a sink
/// like any other, called through the same method, but statically: through a `dyn` call
/// every streamed update would be written out by the caller and read back by the slot just
/// after, and the processor stalls on those reads (docs/architecture.md, "Pull-based provider
/// streams, one delivery path").
#[derive(Clone)]
pub(crate) enum EventTarget {
    Sink(Arc<dyn AgentEventSink>),
    Handoff(Handoff),
}

impl Emitter {
    pub(crate) fn new(target: EventTarget) -> Self {
        Self { target, order: Arc::default() }
    }

    pub(crate) fn order(&self) -> &Arc<EmitOrder> {
        &self.order
    }

    /// Hand one event to the sink; a sink error or panic becomes [`LoopError::Sink`]. A plain
    /// function, so that an event the sink handles at once costs no future of its own. The
    /// caller holds the emit order (or knows nobody else delivers).
    #[inline(always)]
    pub(crate) fn deliver(&self, event: AgentEvent, info: EventInfo) -> Delivered {
        let state = match &self.target {
            // Our own code, which does not panic: no guard.
            EventTarget::Handoff(handoff) => handoff.deliver(event, info).0,
            EventTarget::Sink(sink) => match std::panic::catch_unwind(AssertUnwindSafe(|| sink.deliver(event, info))) {
                Ok(Delivery(state)) => state,
                Err(payload) => return Delivered::Now(Err(LoopError::Sink(pi_types::panic_message(payload.as_ref())))),
            },
        };
        match state {
            State::Done(outcome) => Delivered::Now(sink_outcome(outcome)),
            State::Handed(Taken::Directly { polled: false }) => {
                // Holds nothing to drop; forgotten, it costs no call of `State`'s drop glue
                // per streamed delta.
                std::mem::forget(state);
                Delivered::AfterYield
            }
            pending => Delivered::Later(Unfinished(pending)),
        }
    }

    /// Emit in turn.
    #[allow(clippy::manual_async_fn)] // see docs/architecture.md, "Futures every run holds"
    pub(crate) fn emit(&self, event: AgentEvent) -> impl Future<Output = Result<(), LoopError>> + Send + '_ {
        async move {
            let _turn = self.order.lock().await;
            match self.deliver(event, EventInfo::EVENT) {
                Delivered::Now(outcome) => outcome,
                Delivered::AfterYield => Unfinished::after_yield().await,
                Delivered::Later(unfinished) => unfinished.await,
            }
        }
    }

    /// [`emit`](Self::emit) with its future on the heap, for the few events of a turn (its
    /// start and end, the prompts, the end of the run) emitted by the futures every run holds
    /// while it waits: held inline, an emit's state (the event and the sink's future) would
    /// take its room in them for the whole run.
    pub(crate) fn emit_boxed(&self, event: AgentEvent) -> BoxFuture<'_, Result<(), LoopError>> {
        Box::pin(self.emit(event))
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
    pub(crate) fn emit(&self, event: AgentEvent) -> BoxFuture<'static, Result<(), LoopError>> {
        let emitter = self.0.clone();
        Box::pin(async move { emitter.emit(event).await })
    }
}
