//! The streaming form: a `Stream` of events, the new messages at the end.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use pi_types::{AgentEvent, AgentMessage, BoxError};
use tokio_util::sync::CancellationToken;

use crate::config::{AgentContext, LoopConfig};
use crate::sink::AgentEventSink;
use crate::LoopError;

#[derive(Default)]
struct QueueSink {
    events: Mutex<VecDeque<AgentEvent>>,
}

impl QueueSink {
    fn pop(&self) -> Option<AgentEvent> {
        self.events.lock().ok().and_then(|mut q| q.pop_front())
    }
}

impl AgentEventSink for QueueSink {
    fn emit<'a>(&'a self, event: &'a AgentEvent) -> BoxFuture<'a, Result<(), BoxError>> {
        if let Ok(mut events) = self.events.lock() {
            events.push_back(event.clone());
        }
        Box::pin(std::future::ready(Ok(())))
    }
}

type LoopFuture = BoxFuture<'static, Result<Vec<AgentMessage>, LoopError>>;

/// The events of a run as a `Stream`. The run advances only while the stream is polled;
/// dropping the stream drops the run (its tools and provider request included).
pub struct AgentEventStream {
    queue: Arc<QueueSink>,
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
        F: FnOnce(Arc<QueueSink>) -> LoopFuture,
    {
        let queue = Arc::new(QueueSink::default());
        let run = make(Arc::clone(&queue));
        Self { queue, run: Some(run), outcome: None }
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
        if let Some(event) = self.queue.pop() {
            return Poll::Ready(Some(event));
        }
        let Some(run) = self.run.as_mut() else { return Poll::Ready(None) };
        match run.poll_unpin(cx) {
            Poll::Ready(outcome) => {
                self.run = None;
                self.outcome = Some(outcome);
                Poll::Ready(self.queue.pop())
            }
            Poll::Pending => match self.queue.pop() {
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
    AgentEventStream::start(|sink| {
        async move { crate::run_agent_loop(prompts, context, config, sink, cancel).await }.boxed()
    })
}

/// Continue from the current transcript, as a stream of events. Fails at once on an
/// empty transcript or one that ends with an assistant message.
pub fn agent_loop_continue(
    context: AgentContext,
    config: LoopConfig,
    cancel: CancellationToken,
) -> Result<AgentEventStream, LoopError> {
    crate::run::check_continue(&context)?;
    Ok(AgentEventStream::start(|sink| {
        async move { crate::run_agent_loop_continue(context, config, sink, cancel).await }.boxed()
    }))
}
