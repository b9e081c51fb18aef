//! The `Stream` form's one-event slot, the sink its run delivers to (protocol: [`crate::stream`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use pi_types::AgentEvent;

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
    pub(crate) fn take(&self) -> Option<AgentEvent> {
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
