//! Pushing a response's block events to their consumer from inside the producer's send.
//!
//! # Protocol
//! A stream made by [`AssistantMessageEventStream::from_producer`] is pulled: each event is put
//! in the stream's slot, the producer yields, and the consumer takes the event when it polls the
//! stream again. A consumer that handles events synchronously can instead register an
//! [`EventConsumer`] with [`AssistantMessageEventStream::push_to`]; from then on:
//!
//! * each block event (`*_start`, `*_delta`, `*_end`) is offered to
//!   [`EventConsumer::consume`] from inside the producer's send, before it would be put in the
//!   slot. [`Consumed::Handled`] lets the producer go on at once, without a yield;
//!   [`Consumed::Waiting`] makes it yield until [`EventConsumer::poll_ready`] is ready (the
//!   stream polls that before it polls the producer again); [`Consumed::Refused`] hands the
//!   event back, and it goes through the slot as if nothing were registered;
//!   [`Consumed::Stop`] (or [`Flow::Stop`] from `poll_ready`) makes the producer yield and the
//!   stream end at once, without a terminal event: the consumer wants no more (its sink failed,
//!   say) and should not wait for the provider's next event to say so;
//! * `start`, `done` and `error` always go through the slot, so the stream still sees the
//!   response begin and end (its timing and final message are unchanged).
//!
//! Events reach the consumer in the order they are sent either way, and the producer never
//! runs ahead of one that is waiting. A cancellation raised while an event is consumed is seen by
//! the producer before it makes the next one, as with pulled events.
//!
//! [`AssistantMessageEventStream::from_producer`]: crate::AssistantMessageEventStream::from_producer
//! [`AssistantMessageEventStream::push_to`]: crate::AssistantMessageEventStream::push_to

use std::sync::Arc;
use std::task::{Context, Poll};

use crate::event::AssistantMessageEvent;

/// Takes a stream's block events as its producer sends them; see the [module docs](self).
pub trait EventConsumer: Send + Sync {
    /// Handle one block event, sent right now. `metadata_changed` tells, as
    /// [`AssistantMessageEventStream::metadata_changed`](crate::AssistantMessageEventStream::metadata_changed)
    /// does for a pulled event, whether the partial's fields other than `content` may differ from
    /// the previous event's.
    fn consume(&self, event: AssistantMessageEvent, metadata_changed: bool) -> Consumed;

    /// Finish what a [`Consumed::Waiting`] left to do; ready when nothing is left, with whether
    /// the stream goes on. The stream polls this before it polls its producer again.
    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Flow>;
}

/// Whether a stream goes on after [`EventConsumer::poll_ready`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// The producer is polled again.
    Continue,
    /// The stream ends now, without a terminal event.
    Stop,
}

/// What [`EventConsumer::consume`] did with an event.
#[derive(Debug)]
pub enum Consumed {
    /// Handled: the producer goes on at once.
    Handled,
    /// Taken, and still being handled: the producer waits until
    /// [`EventConsumer::poll_ready`] is ready.
    Waiting,
    /// Not taken: the event goes through the stream as a pulled event.
    Refused(AssistantMessageEvent),
    /// Taken, and the consumer wants no more: the producer yields and the stream ends at once,
    /// without a terminal event.
    Stop,
}

/// A registered consumer, as a stream's slot keeps it.
#[derive(Clone)]
pub(crate) struct Registered(pub(crate) Arc<dyn EventConsumer>);

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventConsumer")
    }
}

/// Whether an event is offered to a consumer: every event but `start`, `done` and `error`.
pub(crate) fn is_block_event(event: &AssistantMessageEvent) -> bool {
    !matches!(
        event,
        AssistantMessageEvent::Start { .. } | AssistantMessageEvent::Done { .. } | AssistantMessageEvent::Error { .. }
    )
}
