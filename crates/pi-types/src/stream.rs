//! The assistant-message event stream and the stream-function trait every provider implements.
//!
//! A provider's stream is pulled: the producer runs only while the consumer polls, and
//! [`EventSender::send`] hands over one event and waits until the consumer asks for the
//! next. So a provider never runs ahead of the loop, and a cancellation raised while the
//! loop handles an event is seen by the provider before it produces the next delta.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Instant;

use futures::stream::{BoxStream, Stream, StreamExt};

use crate::event::AssistantMessageEvent;
use crate::message::AssistantMessage;
use crate::model::Model;
use crate::options::StreamOptions;
use crate::transcript::TranscriptContext;

/// The events of one assistant response plus its final message.
///
/// Contract: yields at most one terminal event (`done`/`error`) and nothing after it. The
/// final message of a response this stream saw start gets `duration_ms`, measured from the
/// stream's creation with a monotonic clock (unless it already has one or its timestamp
/// predates the stream).
pub struct AssistantMessageEventStream {
    inner: BoxStream<'static, AssistantMessageEvent>,
    created: Instant,
    created_at_ms: u64,
    final_message: Option<Arc<AssistantMessage>>,
    ended: bool,
}

impl std::fmt::Debug for AssistantMessageEventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AssistantMessageEventStream").field("ended", &self.ended).finish_non_exhaustive()
    }
}

impl AssistantMessageEventStream {
    /// Wrap any stream of events.
    pub fn new(events: impl Stream<Item = AssistantMessageEvent> + Send + 'static) -> Self {
        Self {
            inner: events.boxed(),
            created: Instant::now(),
            created_at_ms: crate::now_ms(),
            final_message: None,
            ended: false,
        }
    }

    /// A stream driven by an async producer that hands events over one at a time.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use pi_types::{AssistantMessage, AssistantMessageEvent, AssistantMessageEventStream, StopReason};
    /// let stream = AssistantMessageEventStream::from_producer(|tx| async move {
    ///     let message = Arc::new(AssistantMessage { stop_reason: StopReason::Stop, ..Default::default() });
    ///     tx.send(AssistantMessageEvent::Done { reason: StopReason::Stop, message }).await;
    /// });
    /// let final_message = futures_executor::block_on(stream.result()).unwrap();
    /// assert_eq!(final_message.stop_reason, StopReason::Stop);
    /// ```
    pub fn from_producer<F, Fut>(producer: F) -> Self
    where
        F: FnOnce(EventSender) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let slot = Arc::new(Mutex::new(None));
        let future = producer(EventSender { slot: Arc::clone(&slot) });
        Self::new(ProducerStream { slot, future: Some(Box::pin(future)) })
    }

    /// A stream of ready events (tests, replays).
    pub fn from_events(events: impl IntoIterator<Item = AssistantMessageEvent>) -> Self {
        let events: Vec<_> = events.into_iter().collect();
        Self::new(futures::stream::iter(events))
    }

    /// The final message, once the terminal event was yielded.
    pub fn final_message(&self) -> Option<&Arc<AssistantMessage>> {
        self.final_message.as_ref()
    }

    /// Drain the stream; the final message, or `None` if it ended without a terminal event.
    pub async fn result(mut self) -> Option<AssistantMessage> {
        while self.next().await.is_some() {}
        self.into_final_message()
    }

    /// The final message seen so far, without draining (copied only if still shared).
    pub fn into_final_message(self) -> Option<AssistantMessage> {
        self.final_message.map(|m| Arc::try_unwrap(m).unwrap_or_else(|shared| (*shared).clone()))
    }

    fn time(&self, message: &mut Arc<AssistantMessage>) {
        if message.duration_ms.is_some() || message.timestamp < self.created_at_ms {
            return;
        }
        let elapsed = self.created.elapsed().as_secs_f64() * 1000.0;
        Arc::make_mut(message).duration_ms = Some(elapsed.round() as u64);
    }
}

impl Stream for AssistantMessageEventStream {
    type Item = AssistantMessageEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match self.inner.poll_next_unpin(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                self.ended = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(mut event)) => {
                match &mut event {
                    AssistantMessageEvent::Done { message, .. }
                    | AssistantMessageEvent::Error { error: message, .. } => {
                        self.time(message);
                        self.final_message = Some(Arc::clone(message));
                        self.ended = true;
                    }
                    _ => {}
                }
                Poll::Ready(Some(event))
            }
        }
    }
}

/// Hands events from a producer to its [`AssistantMessageEventStream`], one at a time.
#[derive(Debug)]
pub struct EventSender {
    slot: Arc<Mutex<Option<AssistantMessageEvent>>>,
}

impl EventSender {
    /// Give one event to the consumer; resolves when the consumer asks for the next one.
    pub async fn send(&self, event: AssistantMessageEvent) {
        if let Ok(mut slot) = self.slot.lock() {
            *slot = Some(event);
        }
        YieldOnce(false).await;
    }
}

struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut TaskContext<'_>) -> Poll<()> {
        // The producer is only ever polled by its `ProducerStream`, which takes the event
        // and re-polls on the next `poll_next`; no waker is needed for this one yield.
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            Poll::Pending
        }
    }
}

struct ProducerStream {
    slot: Arc<Mutex<Option<AssistantMessageEvent>>>,
    future: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl ProducerStream {
    fn take_event(&self) -> Option<AssistantMessageEvent> {
        self.slot.lock().ok().and_then(|mut slot| slot.take())
    }
}

impl Stream for ProducerStream {
    type Item = AssistantMessageEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        if let Some(event) = self.take_event() {
            return Poll::Ready(Some(event));
        }
        let Some(future) = self.future.as_mut() else { return Poll::Ready(None) };
        match future.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.future = None;
                Poll::Ready(self.take_event())
            }
            Poll::Pending => match self.take_event() {
                Some(event) => Poll::Ready(Some(event)),
                None => Poll::Pending,
            },
        }
    }
}

/// A provider entry point: turn a model, a normalized transcript and options into a stream.
///
/// Contract (as the reference's): never fails. Failures arrive as an `error` event and a
/// final message with stop reason `error` or `aborted` and an `error_message`. Closures of
/// the same shape implement it.
pub trait StreamFn: Send + Sync {
    /// Start one request.
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream;
}

impl<F> StreamFn for F
where
    F: Fn(&Model, TranscriptContext, StreamOptions) -> AssistantMessageEventStream + Send + Sync,
{
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        self(model, context, options)
    }
}
