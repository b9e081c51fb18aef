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
use pi_types::{AgentEvent, BoxError};

use crate::emit_order::EmitOrder;
use crate::handoff::{Handoff, Shared};
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

/// What [`AgentEventSink::deliver`] did with an event: handled, or being handled. The one
/// outcome type of a delivery: the loop awaits it, whoever made it (a sink, the `Stream` form's
/// slot), and so can a sink that forwards to another sink.
#[must_use = "the loop awaits the outcome"]
pub struct Delivery(pub(crate) State);

pub(crate) enum State {
    /// Handled, with this outcome.
    Done(Result<(), BoxError>),
    /// Being handled by this future.
    Pending(BoxFuture<'static, Result<(), BoxError>>),
    /// Put into the `Stream` form's slot by an update the loop itself awaits: pending when first
    /// polled, right after the event went in, and done when polled again, which only the
    /// consumer's next `poll_next` does, after it took the event (it always takes before it
    /// polls the run). Holds no reference to the slot: a streamed update costs no reference
    /// count, and no waker (see [`crate::stream`]).
    AfterYield { polled: bool },
    /// In the `Stream` form's slot until the consumer takes it, which wakes the delivery.
    InSlot(Arc<Shared>),
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

    pub(crate) fn after_yield() -> Self {
        Self(State::AfterYield { polled: false })
    }

    pub(crate) fn in_slot(slot: Arc<Shared>) -> Self {
        Self(State::InSlot(slot))
    }
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            State::Done(outcome) => f.debug_tuple("Done").field(outcome).finish(),
            State::Pending(_) | State::AfterYield { .. } | State::InSlot(_) => f.write_str("Pending(..)"),
        }
    }
}

/// Awaiting a delivery gives its outcome; the sink's error, or a panic in its future, is
/// [`LoopError::Sink`].
impl Future for Delivery {
    type Output = Result<(), LoopError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let polled = match &mut self.get_mut().0 {
            State::Done(outcome) => return Poll::Ready(sink_outcome(std::mem::replace(outcome, Ok(())))),
            State::AfterYield { polled } => {
                return match std::mem::replace(polled, true) {
                    true => Poll::Ready(Ok(())),
                    false => Poll::Pending,
                };
            }
            State::InSlot(slot) => return slot.poll_taken(cx).map(Ok),
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

/// A sink's error as the run's.
#[cold]
pub(crate) fn sink_error(error: BoxError) -> LoopError {
    LoopError::Sink(error.to_string())
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
        self.give(event, info.awaited_directly())
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

    /// Hand one event to the sink; a panic in its `deliver` is its failed delivery. A plain
    /// function, so that an event the sink handles at once costs no future of its own. The
    /// caller holds the emit order (or knows nobody else delivers).
    #[inline(always)]
    pub(crate) fn deliver(&self, event: AgentEvent, info: EventInfo) -> Delivery {
        match &self.target {
            // Our own code, which does not panic: no guard.
            EventTarget::Handoff(handoff) => handoff.deliver(event, info),
            EventTarget::Sink(sink) => match std::panic::catch_unwind(AssertUnwindSafe(|| sink.deliver(event, info))) {
                Ok(delivery) => delivery,
                Err(payload) => Delivery::ready(Err(pi_types::panic_message(payload.as_ref()).into())),
            },
        }
    }

    /// Emit in turn.
    #[allow(clippy::manual_async_fn)] // see docs/architecture.md, "Futures every run holds"
    pub(crate) fn emit(&self, event: AgentEvent) -> impl Future<Output = Result<(), LoopError>> + Send + '_ {
        async move {
            let _turn = self.order.lock().await;
            self.deliver(event, EventInfo::EVENT).await
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
