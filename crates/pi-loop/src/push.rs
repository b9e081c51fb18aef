//! A streamed response's `message_update`s, pushed to the run's sink from inside the provider.
//!
//! # Protocol
//! When the run's sink [`delivers_updates`](crate::AgentEventSink::delivers_updates), or the
//! run feeds the `Stream` form, and the provider builds its response with a builder (so the loop
//! needs no copy of its own), the loop registers a [`PushDelivery`] on the response's stream once
//! `start` was handled (see [`pi_types::push`]). Each block event then becomes its
//! `message_update` and is delivered as the provider sends it, in order, with the same rules as
//! a pulled one:
//!
//! * the update is delivered only while nobody holds the emit order (during a response only the
//!   loop emits, so this always holds; otherwise the event is refused and pulled);
//! * a sink that answers asynchronously holds the provider until its future is done, polled by
//!   the stream before the provider (`Consumed::Waiting`); the `Stream` form's handoff holds it
//!   until the consumer took the update, as the loop's own emit does;
//! * a sink's error or panic fails the run: it is kept and the response's stream ends at once
//!   (`Consumed::Stop`), so the loop reports it without waiting for the provider's next event,
//!   as it does for a pulled update.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use pi_types::{AgentEvent, AssistantMessageEvent, BoxError, Consumed, EventConsumer, Flow};

use crate::emit_order::EmitOrder;
use crate::sink::{AgentEventSink, UpdateDelivery};
use crate::stream::Handoff;
use crate::LoopError;

/// Where pushed updates go.
pub(crate) enum Destination {
    /// A sink that takes updates by value.
    Sink(Arc<dyn AgentEventSink>),
    /// The `Stream` form's handoff: an update waits there until the consumer takes it.
    Handoff(Arc<Handoff>),
}

/// Delivers one response's pushed updates to the run's target; see the [module docs](self).
pub(crate) struct PushDelivery {
    destination: Destination,
    order: Arc<EmitOrder>,
    /// Whether `failure` holds the run's failure (read per event; set once).
    failed: AtomicBool,
    failure: Mutex<Option<LoopError>>,
    /// Whether `pending` holds a delivery in progress (read per event).
    waiting: AtomicBool,
    pending: Mutex<Option<BoxFuture<'static, Result<(), BoxError>>>>,
}

impl PushDelivery {
    pub(crate) fn new(destination: Destination, order: Arc<EmitOrder>) -> Self {
        Self {
            destination,
            order,
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            waiting: AtomicBool::new(false),
            pending: Mutex::new(None),
        }
    }

    /// The failure of a pushed update's delivery, once (the run ends with it).
    pub(crate) fn take_failure(&self) -> Result<(), LoopError> {
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        match self.failure.lock().unwrap_or_else(PoisonError::into_inner).take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    fn fail(&self, error: LoopError) {
        let mut failure = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
        if failure.is_none() {
            *failure = Some(error);
        }
        self.failed.store(true, Ordering::Release);
    }

    fn sink_failed(&self, error: impl std::fmt::Display) {
        self.fail(LoopError::Sink(error.to_string()));
    }
}

impl EventConsumer for PushDelivery {
    fn consume(&self, event: AssistantMessageEvent, metadata_changed: bool) -> Consumed {
        if self.failed.load(Ordering::Acquire) {
            return Consumed::Stop;
        }
        if self.waiting.load(Ordering::Acquire) || !self.order.is_free() {
            return Consumed::Refused(event);
        }
        let Some(message) = event.partial().cloned() else { return Consumed::Refused(event) };
        let update = AgentEvent::MessageUpdate { message, assistant_message_event: event };
        let sink = match &self.destination {
            Destination::Sink(sink) => sink,
            Destination::Handoff(handoff) => {
                handoff.put(update);
                self.waiting.store(true, Ordering::Release);
                return Consumed::Waiting;
            }
        };
        let delivery = std::panic::catch_unwind(AssertUnwindSafe(|| sink.deliver_update(update, metadata_changed)));
        match delivery {
            Ok(UpdateDelivery::Done(Ok(()))) => Consumed::Handled,
            Ok(UpdateDelivery::Done(Err(error))) => {
                self.sink_failed(error);
                Consumed::Stop
            }
            Ok(UpdateDelivery::Pending(future)) => {
                *self.pending.lock().unwrap_or_else(PoisonError::into_inner) = Some(future);
                self.waiting.store(true, Ordering::Release);
                Consumed::Waiting
            }
            Err(payload) => {
                self.sink_failed(pi_types::error::panic_message(payload.as_ref()));
                Consumed::Stop
            }
        }
    }

    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Flow> {
        if self.failed.load(Ordering::Acquire) {
            return Poll::Ready(Flow::Stop);
        }
        if !self.waiting.load(Ordering::Acquire) {
            return Poll::Ready(Flow::Continue);
        }
        if let Destination::Handoff(handoff) = &self.destination {
            // The consumer takes the update when the run yields, and polls the run again after
            // it: no waker is needed, as for the loop's own emits.
            if handoff.holds_event() {
                return Poll::Pending;
            }
            self.waiting.store(false, Ordering::Release);
            return Poll::Ready(Flow::Continue);
        }
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(future) = pending.as_mut() {
            let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
                Ok(Poll::Pending) => return Poll::Pending,
                Ok(Poll::Ready(outcome)) => outcome.map_err(|error| error.to_string()),
                Err(payload) => Err(pi_types::error::panic_message(payload.as_ref())),
            };
            *pending = None;
            if let Err(error) = outcome {
                self.sink_failed(error);
            }
        }
        self.waiting.store(false, Ordering::Release);
        Poll::Ready(if self.failed.load(Ordering::Acquire) { Flow::Stop } else { Flow::Continue })
    }
}
