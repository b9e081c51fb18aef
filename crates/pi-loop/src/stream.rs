//! The streaming form: a `Stream` of events, the new messages at the end.
//!
//! # Protocol
//! The run is driven by the stream's `poll_next` and hands over one event at a time through a
//! one-event slot, which is the run's sink ([`AgentEventSink`]): a delivery puts its event into
//! the empty slot and stays pending until the consumer has taken it. So the run never advances past an event the consumer has not taken
//! (back-pressure), no queue of events builds up, and the stream holds no event once it is
//! handed out. A consumer that drops each event before asking for the next leaves the
//! provider's partial message unshared, and the provider grows it in place: streaming stays
//! linear in the response however long it is.
//!
//! An emit inside a tool batch waits with a waker, which taking its event wakes: the batch
//! polls only the calls that were woken. A streamed update needs none: the response's stream
//! polls its delivery before anything else (see [`crate::push`]), so the consumer's next
//! `poll_next` polls it again; skipping the waker saves a clone and a wake of the consumer's
//! task per delta.
//!
//! Whether the slot holds an event is also kept in a flag beside its lock, so that the looks
//! that find nothing to do (the consumer's before it polls the run, an emit's while its event
//! waits or after it was taken) are one load each: per event the lock is taken twice, to put
//! the event in and to take it out.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use pi_types::CancellationToken;
use pi_types::{AgentEvent, AgentMessage};

use crate::config::{AgentContext, LoopConfig};
use crate::sink::AgentEventSink;
use crate::LoopError;

/// The one-event slot between the run and the consumer: the `Stream` form's sink. Locked only
/// to move an event in or out, by the run and the consumer in turn, so a spin lock.
#[derive(Clone, Default)]
pub(crate) struct Handoff(Arc<Shared>);

#[derive(Default)]
pub(crate) struct Shared {
    slot: spin::mutex::SpinMutex<Slot>,
    /// Whether `slot` holds an event; changed only under the lock.
    full: AtomicBool,
}

#[derive(Default)]
struct Slot {
    event: Option<AgentEvent>,
    /// The emit waiting for the consumer to take its event, if it waits with a waker.
    producer: Option<Waker>,
}

impl Handoff {
    /// Take the waiting event, if any, and wake its emit if it waits with a waker.
    fn take(&self) -> Option<AgentEvent> {
        let shared = &*self.0;
        if !shared.full.load(Ordering::Acquire) {
            return None;
        }
        let (event, producer) = {
            let mut slot = shared.slot.lock();
            shared.full.store(false, Ordering::Release);
            (slot.event.take(), slot.producer.take())
        };
        if let Some(waker) = producer {
            waker.wake();
        }
        event
    }

    /// A delivery: the event moves into the slot now; the future resolves once the consumer
    /// took it (and holds no event itself). `awaited_directly`: the loop itself awaits the
    /// delivery (see the module docs), so it needs no waker and no look at the slot.
    pub(crate) fn give(&self, event: AgentEvent, awaited_directly: bool) -> Taken {
        // Deliveries are serialized by the loop, and the run is polled again only after the
        // consumer took the last event, so the slot is empty here.
        let mut slot = self.0.slot.lock();
        debug_assert!(slot.event.is_none(), "a delivery into a full handoff");
        slot.event = Some(event);
        self.0.full.store(true, Ordering::Release);
        drop(slot);
        match awaited_directly {
            true => Taken::Directly { polled: false },
            false => Taken::Waking(Arc::clone(&self.0)),
        }
    }
}

/// See [`Handoff::give`].
pub(crate) enum Taken {
    /// Awaited by the loop itself: pending when first polled, right after the event went in,
    /// and ready when polled again, which only the consumer's next `poll_next` does, after it
    /// took the event (it always takes before it polls the run). No reference to the slot: a
    /// streamed update costs no reference count.
    Directly { polled: bool },
    /// Waits with a waker, which taking the event wakes.
    Waking(Arc<Shared>),
}

impl Future for Taken {
    type Output = ();

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let handoff = match self.get_mut() {
            Taken::Directly { polled } => {
                return match std::mem::replace(polled, true) {
                    true => Poll::Ready(()),
                    false => Poll::Pending,
                };
            }
            Taken::Waking(handoff) => handoff,
        };
        if !handoff.full.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        let mut slot = handoff.slot.lock();
        if slot.event.is_none() {
            return Poll::Ready(());
        }
        if !slot.producer.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            slot.producer = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

type LoopFuture = BoxFuture<'static, Result<Vec<AgentMessage>, LoopError>>;

/// The events of a run as a `Stream`. The run advances only while the stream is polled, and
/// never past an event the consumer has not taken (see the module docs); dropping the stream
/// drops the run (its tools and provider request included).
pub struct AgentEventStream {
    handoff: Handoff,
    run: Option<LoopFuture>,
    outcome: Option<Result<Vec<AgentMessage>, LoopError>>,
}

impl std::fmt::Debug for AgentEventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentEventStream").field("finished", &self.run.is_none()).finish_non_exhaustive()
    }
}

impl AgentEventStream {
    fn start<F>(make: F) -> Self
    where
        F: FnOnce(Arc<dyn AgentEventSink>) -> LoopFuture,
    {
        let handoff = Handoff::default();
        let run = make(Arc::new(handoff.clone()));
        Self { handoff, run: Some(run), outcome: None }
    }

    /// Drain the stream; the messages the run added, or why it failed.
    pub async fn result(mut self) -> Result<Vec<AgentMessage>, LoopError> {
        while self.next().await.is_some() {}
        self.outcome.take().unwrap_or(Ok(Vec::new()))
    }
}

impl Stream for AgentEventStream {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        if let Some(event) = self.handoff.take() {
            return Poll::Ready(Some(event));
        }
        let Some(run) = self.run.as_mut() else { return Poll::Ready(None) };
        match run.poll_unpin(cx) {
            Poll::Ready(outcome) => {
                self.run = None;
                self.outcome = Some(outcome);
                Poll::Ready(self.handoff.take())
            }
            Poll::Pending => match self.handoff.take() {
                Some(event) => Poll::Ready(Some(event)),
                None => Poll::Pending,
            },
        }
    }
}

/// Start a run with new prompts, as a stream of events.
pub fn agent_loop(
    prompts: Vec<AgentMessage>,
    context: AgentContext,
    config: LoopConfig,
    cancel: CancellationToken,
) -> AgentEventStream {
    AgentEventStream::start(|handoff| crate::run::run_agent_loop(prompts, context, config, handoff, cancel).boxed())
}

/// Continue from the current transcript, as a stream of events. Fails at once on an
/// empty transcript or one that ends with an assistant message.
pub fn agent_loop_continue(
    context: AgentContext,
    config: LoopConfig,
    cancel: CancellationToken,
) -> Result<AgentEventStream, LoopError> {
    crate::run::check_continue(&context)?;
    Ok(AgentEventStream::start(|handoff| crate::run::run_agent_loop_continue(context, config, handoff, cancel).boxed()))
}
