//! The `Stream` form's one-event slot, the sink its run delivers to (protocol: [`crate::stream`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use pi_types::AgentEvent;

use crate::sink::Delivery;

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

    /// A delivery: the event moves into the slot now; the delivery is done once the consumer
    /// took it (and holds no event itself). `awaited_directly`: the loop itself awaits the
    /// delivery (see the module docs), so it needs no waker and no look at the slot: the
    /// delivery is done after one yield ([`Delivery::after_yield`]).
    pub(crate) fn give(&self, event: AgentEvent, awaited_directly: bool) -> Delivery {
        // Deliveries are serialized by the loop, and the run is polled again only after the
        // consumer took the last event, so the slot is empty here.
        let mut slot = self.0.slot.lock();
        debug_assert!(slot.event.is_none(), "a delivery into a full handoff");
        slot.event = Some(event);
        self.0.full.store(true, Ordering::Release);
        drop(slot);
        match awaited_directly {
            true => Delivery::after_yield(),
            false => Delivery::in_slot(Arc::clone(&self.0)),
        }
    }
}

impl Shared {
    /// Whether the consumer took the event a delivery put in (ready), or not yet: then the
    /// taking wakes `cx`'s task.
    #[inline]
    pub(crate) fn poll_taken(&self, cx: &mut Context<'_>) -> Poll<()> {
        if !self.full.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        let mut slot = self.slot.lock();
        if slot.event.is_none() {
            return Poll::Ready(());
        }
        if !slot.producer.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            slot.producer = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}
