//! A streamed response's `message_update`s, delivered from inside the provider.
//!
//! # Protocol
//! Once a response's `start` was delivered, the loop registers a [`PushDelivery`] on the
//! response's stream ([`pi_types::EventConsumer`]). Each block event then becomes its `message_update`
//! and goes through the run's one delivery path ([`Emitter::deliver`]) as the provider makes it,
//! in order:
//!
//! * during a response only the loop delivers (no tool runs, and every update of the last tool
//!   batch was delivered before its call completed), so the emit order is almost always free
//!   and an update is delivered at once; should somebody hold it, the update waits its turn in
//!   a future of its own;
//! * a delivery that does not finish at once holds the provider until it does
//!   (`Consumed::Waiting`): the stream polls it before the provider; one into the `Stream` form's
//!   slot finishes when the stream is polled again (`Consumed::Yield`);
//! * a sink's error or panic fails the run: it is kept and the response's stream ends at once
//!   (`Consumed::Stop`), so the loop reports it without waiting for the provider's next event.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::FutureExt;
use pi_types::{AgentEvent, AssistantMessageEvent, Consumed, EventConsumer};

use crate::sink::{sink_error, Delivery, Emitter, EventInfo, State};
use crate::LoopError;

/// Delivers one response's updates; see the [module docs](self).
pub(crate) struct PushDelivery {
    emitter: Emitter,
    /// Whether `failure` holds the run's failure (read per event; set once).
    failed: AtomicBool,
    failure: spin::mutex::SpinMutex<Option<LoopError>>,
    /// Whether `pending` holds a delivery in progress (read per event).
    waiting: AtomicBool,
    /// Taken by the provider's send and the stream's poll in turn, on one task: a spin lock.
    pending: spin::mutex::SpinMutex<Option<Pending>>,
}

/// A delivery in progress.
enum Pending {
    /// The sink's.
    Delivery(Delivery),
    /// An update waiting for the emit order, then delivered.
    Queued(BoxFuture<'static, Result<(), LoopError>>),
}

impl PushDelivery {
    pub(crate) fn new(emitter: Emitter) -> Self {
        Self {
            emitter,
            failed: AtomicBool::new(false),
            failure: spin::mutex::SpinMutex::new(None),
            waiting: AtomicBool::new(false),
            pending: spin::mutex::SpinMutex::new(None),
        }
    }

    /// The failure of an update's delivery, once (the run ends with it).
    pub(crate) fn take_failure(&self) -> Result<(), LoopError> {
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        match self.failure.lock().take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    fn fail(&self, error: LoopError) {
        let mut failure = self.failure.lock();
        if failure.is_none() {
            *failure = Some(error);
        }
        self.failed.store(true, Ordering::Release);
    }

    fn wait_for(&self, pending: Pending) -> Consumed {
        *self.pending.lock() = Some(pending);
        self.waiting.store(true, Ordering::Release);
        Consumed::Waiting
    }
}

impl EventConsumer for PushDelivery {
    fn consume(&self, event: AssistantMessageEvent, metadata_changed: bool) -> Consumed {
        if self.failed.load(Ordering::Acquire) {
            return Consumed::Stop;
        }
        // Every block event carries its partial.
        let Some(message) = event.partial().cloned() else { return Consumed::Handled };
        let update = AgentEvent::MessageUpdate { message, assistant_message_event: event };
        let info = EventInfo::update(metadata_changed);
        if !self.emitter.order().is_free() {
            let emitter = self.emitter.clone();
            return self.wait_for(Pending::Queued(Box::pin(async move {
                let _turn = emitter.order().lock().await;
                emitter.deliver(update, info).await
            })));
        }
        let delivery = self.emitter.deliver(update, info);
        match delivery.0 {
            State::Done(Ok(())) => Consumed::Handled,
            State::Done(Err(error)) => {
                self.fail(sink_error(error));
                Consumed::Stop
            }
            // The `Stream` form's slot took it; the delivery completes once the stream was
            // polled again (`State::AfterYield`), which the stream does for `Yield`: no future
            // is kept for it. It holds nothing to drop; forgotten, it costs no call of its drop
            // glue per streamed delta.
            State::AfterYield { polled: false } => {
                std::mem::forget(delivery);
                Consumed::Yield
            }
            state => self.wait_for(Pending::Delivery(Delivery(state))),
        }
    }

    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<ControlFlow<()>> {
        if self.failed.load(Ordering::Acquire) {
            return Poll::Ready(ControlFlow::Break(()));
        }
        if !self.waiting.load(Ordering::Acquire) {
            return Poll::Ready(ControlFlow::Continue(()));
        }
        let mut pending = self.pending.lock();
        let outcome = match pending.as_mut() {
            None => Ok(()),
            Some(Pending::Delivery(delivery)) => match delivery.poll_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(outcome) => outcome,
            },
            Some(Pending::Queued(queued)) => match queued.poll_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(outcome) => outcome,
            },
        };
        *pending = None;
        self.waiting.store(false, Ordering::Release);
        match outcome {
            Ok(()) => Poll::Ready(ControlFlow::Continue(())),
            Err(error) => {
                self.fail(error);
                Poll::Ready(ControlFlow::Break(()))
            }
        }
    }
}
