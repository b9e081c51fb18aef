//! Where a run's events go.

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
pub(crate) struct Emitter<'s> {
    sink: &'s dyn AgentEventSink,
    lock: tokio::sync::Mutex<()>,
}

impl<'s> Emitter<'s> {
    pub(crate) fn new(sink: &'s dyn AgentEventSink) -> Self {
        Self { sink, lock: tokio::sync::Mutex::new(()) }
    }

    pub(crate) async fn emit(&self, event: AgentEvent) -> Result<(), crate::LoopError> {
        let _turn = self.lock.lock().await;
        match pi_types::catch_call(|| self.sink.emit(&event)).await {
            Ok(()) => Ok(()),
            Err(message) => Err(crate::LoopError::Sink(message)),
        }
    }
}
