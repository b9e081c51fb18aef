//! Handing a response's block events to their consumer as they are made (the protocol is
//! [`EventConsumer`]'s).

use std::ops::ControlFlow;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::event::AssistantMessageEvent;

/// Takes a stream's block events as they are made. Public because the agent loop (pi-loop) is
/// one; applications read a stream as a `Stream` or through pi-loop.
///
/// # Protocol
/// A consumer that handles block events itself (the agent loop turns each into a
/// `message_update`) registers an [`EventConsumer`] with
/// [`AssistantMessageEventStream::push_to`]. From then on:
///
/// * each block event (`*_start`, `*_delta`, `*_end`) is given to [`EventConsumer::consume`]
///   instead of being yielded by the stream. For a producer's stream
///   ([`from_producer`](crate::AssistantMessageEventStream::from_producer)) that happens inside
///   the producer's send, so a handled event costs the producer no yield; for any other stream,
///   inside the stream's `poll_next`;
/// * [`Consumed::Handled`] lets the producer go on at once; [`Consumed::Waiting`] makes it wait
///   until [`EventConsumer::poll_ready`] is ready (the stream polls that, and nothing else, until
///   it is); [`Consumed::Yield`] makes the stream's `poll_next` return `Pending` once, waking
///   nobody, and the producer goes on when the stream is polled next; [`Consumed::Stop`] (or
///   `ControlFlow::Break` from `poll_ready`) ends the stream at once, without a terminal event: the
///   consumer wants no more (its sink failed, say) and should not wait for the provider's next
///   event to say so;
/// * `start`, `done` and `error` are still yielded, so the stream's owner sees the response
///   begin and end (its timing and final message are unchanged).
///
/// Events reach the consumer in the order they are made, and the producer never runs ahead of
/// one that is waiting. A cancellation raised while an event is consumed is seen by the producer
/// before it makes the next one, as with yielded events.
///
/// [`AssistantMessageEventStream::push_to`]: crate::AssistantMessageEventStream::push_to
pub trait EventConsumer: Send + Sync {
    /// Handle one block event. `metadata_changed` tells, as
    /// [`AssistantMessageEventStream::metadata_changed`](crate::AssistantMessageEventStream::metadata_changed)
    /// does for a yielded event, whether the partial's fields other than `content` may differ
    /// from the previous event's.
    fn consume(&self, event: AssistantMessageEvent, metadata_changed: bool) -> Consumed;

    /// Finish what a [`Consumed::Waiting`] left to do; ready when nothing is left, with whether
    /// the stream goes on: `Continue` polls the producer again, `Break` ends the stream now,
    /// without a terminal event (as [`Consumed::Stop`] does). The stream polls this before it
    /// polls its producer again.
    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<ControlFlow<()>>;
}

/// What [`EventConsumer::consume`] did with an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Consumed {
    /// Handled: the producer goes on at once.
    Handled,
    /// Taken, and still being handled: the producer waits until
    /// [`EventConsumer::poll_ready`] is ready.
    Waiting,
    /// Handled once the stream's owner has seen it pending: `poll_next` returns `Pending` once
    /// without waking anybody, and the producer goes on at the next `poll_next`. Only for a
    /// consumer whose owner polls the stream again by itself: the loop's `Stream` form hands
    /// each update out of the poll that made it, and its consumer's next `poll_next` goes on.
    Yield,
    /// Taken, and the consumer wants no more: the stream ends at once, without a terminal event.
    Stop,
}

/// A registered consumer.
#[derive(Clone)]
pub(crate) struct Registered(pub(crate) Arc<dyn EventConsumer>);

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventConsumer")
    }
}

/// Whether an event is given to a consumer: every event but `start`, `done` and `error`.
pub(crate) fn is_block_event(event: &AssistantMessageEvent) -> bool {
    !matches!(
        event,
        AssistantMessageEvent::Start { .. } | AssistantMessageEvent::Done { .. } | AssistantMessageEvent::Error { .. }
    )
}
