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
//! polls only the calls that were woken. A streamed update needs none: its delivery asks the
//! response's stream to yield once (`Consumed::Yield`, see `crate::push`), and the consumer's
//! next `poll_next`, after it took the update, lets the provider go on; skipping the waker
//! saves a clone and a wake of the consumer's task per delta.
//!
//! Whether the slot holds an event is also kept in a flag beside its lock, so that the looks
//! that find nothing to do (the consumer's before it polls the run, an emit's while its event
//! waits or after it was taken) are one load each: per event the lock is taken twice, to put
//! the event in and to take it out.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use pi_types::CancellationToken;
use pi_types::{AgentEvent, AgentMessage};

use crate::config::LoopConfig;
use crate::context::AgentContext;
use crate::handoff::Handoff;
use crate::sink::EventTarget;
use crate::LoopError;

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
        F: FnOnce(EventTarget) -> LoopFuture,
    {
        let handoff = Handoff::default();
        let run = make(EventTarget::Handoff(handoff.clone()));
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

/// Start a run with new prompts, as a stream of events: [`run_agent_loop`](crate::run_agent_loop)
/// with the stream as its sink (the same messages, including the system message that declares
/// the context's tools when the transcript has not declared them yet). Consume it with
/// `futures::StreamExt::next`, or await [`AgentEventStream::result`] for the messages alone.
pub fn agent_loop(
    prompts: Vec<AgentMessage>,
    context: AgentContext,
    config: LoopConfig,
    cancel: CancellationToken,
) -> AgentEventStream {
    AgentEventStream::start(|handoff| crate::run::run_to(prompts, context, config, handoff, cancel).boxed())
}

/// Continue from the current transcript, as a stream of events. Fails at once on an
/// empty transcript or one that ends with an assistant message.
pub fn agent_loop_continue(
    context: AgentContext,
    config: LoopConfig,
    cancel: CancellationToken,
) -> Result<AgentEventStream, LoopError> {
    crate::run::check_continue(&context)?;
    Ok(AgentEventStream::start(|handoff| crate::run::run_continue_to(context, config, handoff, cancel).boxed()))
}
