//! Where a run's events go.

use std::sync::Arc;

use futures::future::BoxFuture;
use pi_types::{AgentEvent, BoxError};

/// Receives every event of a run, awaited one at a time.
///
/// The loop waits for `emit` before it goes on, so a sink sees each event while it is
/// current (the shared partial message in `message_update` is the message right after that
/// event). Returning `Err` makes the run fail with that error, like a throwing listener.
pub trait AgentEventSink: Send + Sync {
    /// Handle one event.
    fn emit<'a>(&'a self, event: &'a AgentEvent) -> BoxFuture<'a, Result<(), BoxError>>;
}

/// A synchronous closure sink: `|event| { ... }`.
pub struct FnSink<F>(pub F);

impl<F> AgentEventSink for FnSink<F>
where
    F: Fn(&AgentEvent) + Send + Sync,
{
    fn emit<'a>(&'a self, event: &'a AgentEvent) -> BoxFuture<'a, Result<(), BoxError>> {
        (self.0)(event);
        Box::pin(std::future::ready(Ok(())))
    }
}

/// A sink that drops every event.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullSink;

impl AgentEventSink for NullSink {
    fn emit<'a>(&'a self, _event: &'a AgentEvent) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Serializes emits: concurrently running tools never call the user's sink at the same time.
///
/// The sink is shared (`Arc`) because tool progress updates are handed to it from inside the
/// tool's own update callback, which may outlive any borrow the loop holds.
pub(crate) struct Emitter {
    sink: Arc<dyn AgentEventSink>,
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl Emitter {
    pub(crate) fn new(sink: Arc<dyn AgentEventSink>) -> Self {
        Self { sink, lock: Arc::new(tokio::sync::Mutex::new(())) }
    }

    pub(crate) async fn emit(&self, event: AgentEvent) -> Result<(), crate::LoopError> {
        let _turn = self.lock.lock().await;
        deliver(&*self.sink, &event).await
    }

    /// A handle whose emits borrow nothing, for deliveries started outside the loop's own
    /// futures (a tool's update callback). They share this emitter's order.
    pub(crate) fn detached(&self) -> DetachedEmitter {
        DetachedEmitter { sink: Arc::clone(&self.sink), lock: Arc::clone(&self.lock) }
    }
}

/// See [`Emitter::detached`].
pub(crate) struct DetachedEmitter {
    sink: Arc<dyn AgentEventSink>,
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl DetachedEmitter {
    /// Emit; the future takes its place in the emit order when first polled.
    pub(crate) fn emit(&self, event: AgentEvent) -> BoxFuture<'static, Result<(), crate::LoopError>> {
        let sink = Arc::clone(&self.sink);
        let lock = Arc::clone(&self.lock);
        Box::pin(async move {
            let _turn = lock.lock_owned().await;
            deliver(&*sink, &event).await
        })
    }
}

async fn deliver(sink: &dyn AgentEventSink, event: &AgentEvent) -> Result<(), crate::LoopError> {
    match pi_types::catch_call(|| sink.emit(event)).await {
        Ok(()) => Ok(()),
        Err(message) => Err(crate::LoopError::Sink(message)),
    }
}
