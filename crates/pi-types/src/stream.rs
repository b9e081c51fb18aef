//! The assistant-message event stream and the stream-function trait every provider implements.
//!
//! A provider's stream is pulled: the producer runs only while the consumer polls, and
//! [`EventSender::send`] hands over one event and waits until the consumer asks for the
//! next. So a provider never runs ahead of the loop, and a cancellation raised while the
//! loop handles an event is seen by the provider before it produces the next delta. A consumer
//! that handles block events itself has them given to it as they are made instead
//! ([`AssistantMessageEventStream::push_to`], protocol in [`crate::push`]), with the same
//! guarantees.
//!
//! A stream whose producer may end without a terminal event keeps what it streamed for
//! [`AssistantMessageEventStream::take_unfinished`]: a builder leaves its message; any other
//! producer's events are followed by a copy of its own ([`StreamFollower`](crate::StreamFollower)).

use std::future::Future;
use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Instant;

use futures_core::stream::{BoxStream, Stream};

use crate::event::AssistantMessageEvent;
use crate::message::AssistantMessage;
use crate::model::Model;
use crate::options::StreamOptions;
use crate::push::{is_block_event, Consumed, EventConsumer, Registered};
use crate::reduce::StreamFollower;
use crate::transcript::TranscriptContext;

/// The events of one assistant response plus its final message.
///
/// Contract: yields at most one terminal event (`done`/`error`) and nothing after it.
///
/// # Timing
/// The final message gets `duration_ms`, measured with a monotonic clock from the stream's
/// creation, when the response started in this stream: the stream yielded a `start` event, or
/// the message's `timestamp` does not predate the stream. A message that already has a
/// `duration_ms`, or a response that started elsewhere and is only forwarded here (no `start`,
/// an older timestamp, such as a deferred result fetched later), stays as it is. The rule does
/// not depend on when a producer stamps its timestamp: one stamped just before the stream was
/// created (the millisecond may tick in between) is timed as soon as the response starts.
pub struct AssistantMessageEventStream {
    /// Where the events come from: a producer's slot is polled without a dynamic call.
    source: Source,
    clock: StreamClock,
    saw_start: bool,
    final_message: Option<Arc<AssistantMessage>>,
    ended: bool,
    /// See [`metadata_changed`](Self::metadata_changed).
    metadata_changed: bool,
    /// For a stream that is not a producer's: its consumer and its copy of what it streamed
    /// (a producer's slot keeps both).
    follow: Option<Box<Follow>>,
    /// Why the stream ended early, when its producer panicked.
    panic: Option<String>,
}

/// What a stream that is not a producer's keeps beside its events.
#[derive(Default)]
struct Follow {
    consumer: Option<Registered>,
    /// Whether a consumed event is still being handled: its `poll_ready` comes first.
    waiting: bool,
    copy: Option<StreamedCopy>,
}

/// A stream's copy of what a producer without a builder streamed.
type StreamedCopy = (Arc<AssistantMessage>, StreamFollower);

/// Keeps `copy` current with `event`: made at `start`, brought up to date by block events.
fn observe(copy: &mut Option<StreamedCopy>, event: &AssistantMessageEvent) {
    match event {
        AssistantMessageEvent::Start { partial } => {
            *copy = Some((Arc::new((**partial).clone()), StreamFollower::default()));
        }
        AssistantMessageEvent::Done { .. } | AssistantMessageEvent::Error { .. } => {}
        event => {
            if let Some((message, follower)) = copy {
                follower.apply(message, event, true);
            }
        }
    }
}

/// When a stream was created: a monotonic instant and the wall-clock milliseconds.
#[derive(Clone, Copy, Debug)]
struct StreamClock {
    created: Instant,
    created_at_ms: u64,
}

impl StreamClock {
    fn now() -> Self {
        Self { created: Instant::now(), created_at_ms: crate::now_ms() }
    }
}

impl std::fmt::Debug for AssistantMessageEventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AssistantMessageEventStream").field("ended", &self.ended).finish_non_exhaustive()
    }
}

impl AssistantMessageEventStream {
    /// Wrap any stream of events.
    pub fn new(events: impl Stream<Item = AssistantMessageEvent> + Send + 'static) -> Self {
        Self::with_clock(events, StreamClock::now())
    }

    fn with_clock(events: impl Stream<Item = AssistantMessageEvent> + Send + 'static, clock: StreamClock) -> Self {
        Self {
            source: Source::Events(Box::pin(events)),
            clock,
            saw_start: false,
            final_message: None,
            ended: false,
            metadata_changed: true,
            follow: None,
            panic: None,
        }
    }

    /// A stream that first waits for `start` to make the real one, then is that stream: for a
    /// step that must finish before the request can go (resolving a key, say). Pushed events,
    /// timing and [`take_unfinished`](Self::take_unfinished) are the real stream's, as if it had
    /// been returned directly.
    pub fn deferred(start: impl Future<Output = AssistantMessageEventStream> + Send + 'static) -> Self {
        let mut stream = Self::with_clock(Ready(Vec::new().into_iter()), StreamClock::now());
        stream.source = Source::Deferred(Box::pin(start));
        stream
    }

    /// Become `inner`, keeping a consumer registered meanwhile.
    fn adopt(&mut self, inner: Self) {
        let waiting = self.follow.take().and_then(|follow| follow.consumer);
        *self = inner;
        if let Some(Registered(consumer)) = waiting {
            self.push_to(consumer);
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
        // The stream exists from here: whatever the producer stamps comes after.
        let clock = StreamClock::now();
        let slot = Arc::new(Slot::default());
        let future = producer(EventSender { slot: Arc::clone(&slot) });
        let mut stream = Self::with_clock(Ready(Vec::new().into_iter()), clock);
        stream.source =
            Source::Producer(ProducerStream { slot, future: Some(Box::pin(future)), consumer: CONSUMED_NOTHING });
        stream
    }

    /// A stream of ready events (tests, replays).
    pub fn from_events(events: impl IntoIterator<Item = AssistantMessageEvent>) -> Self {
        let events: Vec<_> = events.into_iter().collect();
        Self::new(Ready(events.into_iter()))
    }

    /// A stream that ended before its first event because its provider panicked with `message`
    /// while starting the request (what a consumer that catches that panic hands on).
    pub fn from_panic(message: impl Into<String>) -> Self {
        let mut stream = Self::new(Ready(Vec::new().into_iter()));
        stream.panic = Some(message.into());
        stream
    }

    /// The panic message of a producer (or wrapped stream, or deferred start) that panicked:
    /// the stream then ends at once without a terminal event, and the panic goes no further.
    pub fn panic_message(&self) -> Option<&str> {
        self.panic.as_deref()
    }

    /// The final message, once the terminal event was yielded.
    pub fn final_message(&self) -> Option<&Arc<AssistantMessage>> {
        self.final_message.as_ref()
    }

    /// Whether the fields of the last event's partial other than `content` (usage, ids, stop
    /// reason, ...) may differ from the previous event's. `false` only when the producer's
    /// [`AssistantMessageBuilder`](crate::AssistantMessageBuilder) reports that they did not change
    /// (it counts every [`metadata_mut`](crate::AssistantMessageBuilder::metadata_mut)); a consumer
    /// that keeps its own copy of the message can then skip comparing them.
    pub fn metadata_changed(&self) -> bool {
        self.metadata_changed
    }

    /// Give this stream's block events to `consumer` from now on, instead of yielding each
    /// (see [`EventConsumer`] for the protocol). Returns `false`, and changes nothing, when the stream ended or a
    /// consumer is registered already.
    pub fn push_to(&mut self, consumer: Arc<dyn EventConsumer>) -> bool {
        if self.ended {
            return false;
        }
        match &self.source {
            Source::Producer(producer) => producer.slot.consumer.set(Registered(consumer)).is_ok(),
            Source::Events(_) | Source::Deferred(_) => {
                let follow = self.follow.get_or_insert_with(Box::default);
                if follow.consumer.is_some() {
                    return false;
                }
                follow.consumer = Some(Registered(consumer));
                true
            }
        }
    }

    /// What was streamed of a response whose stream ended without a terminal event, from its
    /// `start` on: the message its builder left, or the stream's copy of a producer's events
    /// made without one. `None` when nothing was streamed or it was taken already.
    pub fn take_unfinished(&mut self) -> Option<Arc<AssistantMessage>> {
        if let Some(slot) = self.slot() {
            if let Some(message) = slot.unfinished.lock().ok()?.take() {
                return Some(message);
            }
            return slot.copy.lock().take().map(|(message, _)| message);
        }
        self.follow.as_mut()?.copy.take().map(|(message, _)| message)
    }

    /// Drain the stream; the final message, or `None` if it ended without a terminal event.
    pub async fn result(mut self) -> Option<AssistantMessage> {
        while std::future::poll_fn(|cx| Pin::new(&mut self).poll_next(cx)).await.is_some() {}
        self.into_final_message()
    }

    /// The final message seen so far, without draining (copied only if still shared).
    pub fn into_final_message(self) -> Option<AssistantMessage> {
        self.final_message.map(|m| Arc::try_unwrap(m).unwrap_or_else(|shared| (*shared).clone()))
    }

    /// The producer's slot, for a stream made by [`from_producer`](Self::from_producer).
    fn slot(&self) -> Option<&Slot> {
        match &self.source {
            Source::Producer(producer) => Some(&producer.slot),
            Source::Events(_) | Source::Deferred(_) => None,
        }
    }

    fn time(&self, message: &mut Arc<AssistantMessage>) {
        let started_here = self.saw_start || message.timestamp >= self.clock.created_at_ms;
        if message.duration_ms.is_some() || !started_here {
            return;
        }
        let elapsed = self.clock.created.elapsed().as_secs_f64() * 1000.0;
        Arc::make_mut(message).duration_ms = Some(elapsed.round() as u64);
    }
}

impl Stream for AssistantMessageEventStream {
    type Item = AssistantMessageEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let this = &mut *self;
        // Looked at in place and returned as polled: the event is not moved out and back in.
        let mut panicked = None;
        let mut polled = loop {
            break match &mut this.source {
                Source::Producer(producer) => poll_pushing_producer(producer, cx, &mut panicked),
                Source::Events(events) => {
                    poll_events(events, this.follow.get_or_insert_with(Box::default), cx, &mut panicked)
                }
                Source::Deferred(start) => match guarded(|| start.as_mut().poll(cx), &mut panicked) {
                    Some(Poll::Ready(inner)) => {
                        this.adopt(inner);
                        continue;
                    }
                    Some(Poll::Pending) => Poll::Pending,
                    None => Poll::Ready(None),
                },
            };
        };
        if let Some(payload) = panicked {
            this.panic = Some(crate::error::panic_message(payload.as_ref()));
            // The producer is not polled again (it may be in any state); dropping it now
            // leaves its builder's message with the slot, for `take_unfinished`.
            match &mut this.source {
                Source::Producer(producer) => producer.future = None,
                source => *source = Source::Events(Box::pin(Ready(Vec::new().into_iter()))),
            }
            polled = Poll::Ready(None);
        }
        // A fresh `Pending`, not the polled value copied out (once per streamed delta, with
        // `Consumed::Yield`): the copy would read the tag just written in a wider load, a stall.
        let Poll::Ready(mut polled) = polled else { return Poll::Pending };
        match &mut polled {
            None => this.ended = true,
            Some(event) => {
                this.metadata_changed = match this.slot() {
                    Some(slot) if slot.metadata_tracked.load(Ordering::Acquire) => slot.take_metadata_touched(),
                    _ => true,
                };
                match event {
                    AssistantMessageEvent::Start { .. } => this.saw_start = true,
                    AssistantMessageEvent::Done { message, .. }
                    | AssistantMessageEvent::Error { error: message, .. } => {
                        this.time(message);
                        this.final_message = Some(Arc::clone(message));
                        this.ended = true;
                    }
                    _ => {}
                }
            }
        }
        Poll::Ready(polled)
    }
}

/// Events that are all there: a stream that is always ready.
struct Ready(std::vec::IntoIter<AssistantMessageEvent>);

impl Stream for Ready {
    type Item = AssistantMessageEvent;

    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut TaskContext<'_>) -> Poll<Option<AssistantMessageEvent>> {
        Poll::Ready(self.0.next())
    }
}

/// The events of an [`AssistantMessageEventStream`].
enum Source {
    /// An async producer's, handed over through its slot.
    Producer(ProducerStream),
    /// Any other stream's.
    Events(BoxStream<'static, AssistantMessageEvent>),
    /// Another stream's, once this future made it (see [`AssistantMessageEventStream::deferred`]).
    Deferred(Pin<Box<dyn Future<Output = AssistantMessageEventStream> + Send>>),
}

/// The next event of a producer, polling its consumer first while a pushed event is still
/// being handled.
#[inline]
fn poll_pushing_producer(
    producer: &mut ProducerStream,
    cx: &mut TaskContext<'_>,
    panicked: &mut Option<Panicked>,
) -> Poll<Option<AssistantMessageEvent>> {
    let ProducerStream { slot, future, consumer } = producer;
    let Some(Registered(registered)) = slot.consumer.get() else { return poll_producer(slot, future, cx, panicked) };
    loop {
        match *consumer {
            CONSUMED_WAITING => match guarded(|| registered.poll_ready(cx), panicked) {
                Some(Poll::Pending) => return Poll::Pending,
                Some(Poll::Ready(ControlFlow::Continue(()))) => *consumer = CONSUMED_NOTHING,
                Some(Poll::Ready(ControlFlow::Break(()))) | None => return Poll::Ready(None),
            },
            CONSUMED_STOP => return Poll::Ready(None),
            _ => {}
        }
        match poll_producer(slot, future, cx, panicked) {
            Poll::Pending => match slot.take_consumed() {
                CONSUMED_WAITING => *consumer = CONSUMED_WAITING,
                CONSUMED_STOP => return Poll::Ready(None),
                // Handled, or to go on at the next poll (`Consumed::Yield`): the producer waits
                // for what it waits for.
                _ => return Poll::Pending,
            },
            polled => {
                // A hand-over that made the producer wait in a poll that also put an event in
                // the slot (a producer that sends concurrently): acted on at the next poll.
                if let state @ (CONSUMED_WAITING | CONSUMED_STOP) = slot.take_consumed() {
                    *consumer = state;
                }
                return polled;
            }
        }
    }
}

/// The next event of a stream that is not a producer's that its consumer (if any) does not
/// take; every event is followed by the stream's copy.
fn poll_events(
    events: &mut BoxStream<'static, AssistantMessageEvent>,
    follow: &mut Follow,
    cx: &mut TaskContext<'_>,
    panicked: &mut Option<Panicked>,
) -> Poll<Option<AssistantMessageEvent>> {
    loop {
        if follow.waiting {
            if let Some(Registered(consumer)) = &follow.consumer {
                match guarded(|| consumer.poll_ready(cx), panicked) {
                    Some(Poll::Pending) => return Poll::Pending,
                    Some(Poll::Ready(ControlFlow::Continue(()))) => {}
                    Some(Poll::Ready(ControlFlow::Break(()))) | None => return Poll::Ready(None),
                }
            }
            follow.waiting = false;
        }
        let event = match guarded(|| events.as_mut().poll_next(cx), panicked) {
            Some(Poll::Ready(Some(event))) => event,
            Some(other) => return other,
            None => return Poll::Ready(None),
        };
        observe(&mut follow.copy, &event);
        let consumer = match &follow.consumer {
            Some(Registered(consumer)) if is_block_event(&event) => consumer,
            _ => return Poll::Ready(Some(event)),
        };
        match guarded(|| consumer.consume(event, true), panicked) {
            Some(Consumed::Handled) => {}
            Some(Consumed::Waiting) => follow.waiting = true,
            Some(Consumed::Yield) => return Poll::Pending,
            Some(Consumed::Stop) | None => return Poll::Ready(None),
        }
    }
}

/// The payload of a panic in code a stream calls.
type Panicked = Box<dyn std::any::Any + Send>;

/// Call into code a stream does not own (a producer, a wrapped stream, a consumer): its panic
/// ends this stream, not the consumer's task. `None` when it panicked, with the payload in
/// `panicked`. Guarded call by call rather than around the whole poll, so that on a producer's
/// path (every streamed delta) what passes through a guard is a flag, not the event.
#[inline(always)]
fn guarded<T>(call: impl FnOnce() -> T, panicked: &mut Option<Panicked>) -> Option<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(call)) {
        Ok(value) => Some(value),
        Err(payload) => {
            *panicked = Some(payload);
            None
        }
    }
}

/// Hands events from a producer to its [`AssistantMessageEventStream`], one at a time.
#[derive(Debug)]
pub struct EventSender {
    slot: Arc<Slot>,
}

/// The one event between a producer and its stream.
#[derive(Debug, Default)]
struct Slot {
    /// Held only to move one event in or out.
    event: spin::mutex::SpinMutex<Option<AssistantMessageEvent>>,
    /// Whether `event` holds one: the stream looks before it locks, and most looks find none.
    full: AtomicBool,
    /// Whether an [`crate::AssistantMessageBuilder`] sends through this slot.
    builder: AtomicBool,
    /// The message of a builder dropped before it ended the response.
    unfinished: Mutex<Option<Arc<AssistantMessage>>>,
    /// Whether a builder sends every event through this slot, so that `metadata_touched` tells
    /// all (cleared when the builder is given up for raw events).
    metadata_tracked: AtomicBool,
    /// Whether the builder edited the message's metadata since the stream yielded an event.
    metadata_touched: AtomicBool,
    /// Where block events are pushed, once registered (see [`crate::push`]).
    consumer: std::sync::OnceLock<Registered>,
    /// The copy of what a producer that sends without a builder streamed.
    copy: spin::mutex::SpinMutex<Option<StreamedCopy>>,
    /// What the consumer did with the last pushed event that made the producer wait
    /// (`CONSUMED_*`), until the stream looks.
    consumed: AtomicU8,
}

impl Slot {
    fn put(&self, event: AssistantMessageEvent) {
        let mut slot = self.event.lock();
        *slot = Some(event);
        self.full.store(true, Ordering::Release);
    }

    /// Reads and clears `metadata_touched`. Without a read-modify-write: the builder only runs
    /// while its stream polls it, never while the stream reads the flag.
    fn take_metadata_touched(&self) -> bool {
        let touched = self.metadata_touched.load(Ordering::Acquire);
        if touched {
            self.metadata_touched.store(false, Ordering::Release);
        }
        touched
    }

    fn take(&self) -> Option<AssistantMessageEvent> {
        if !self.full.load(Ordering::Acquire) {
            return None;
        }
        let mut slot = self.event.lock();
        self.full.store(false, Ordering::Release);
        slot.take()
    }
}

impl EventSender {
    /// Give one event to the consumer; resolves when the consumer asks for the next one.
    pub fn send(&self, event: AssistantMessageEvent) -> SendEvent<'_> {
        SendEvent { slot: &self.slot, event: Some(event) }
    }

    /// [`send`](Self::send) for a producer that is giving up its sender (a builder's terminal
    /// event): the future owns its own handle on the slot.
    pub(crate) fn send_owned(&self, event: AssistantMessageEvent) -> SendOwned {
        SendOwned { slot: Arc::clone(&self.slot), event: Some(event) }
    }

    pub(crate) fn touch_metadata(&self) {
        self.slot.metadata_touched.store(true, Ordering::Release);
    }

    pub(crate) fn attach_builder(&self) {
        self.slot.builder.store(true, Ordering::Release);
        self.slot.metadata_tracked.store(true, Ordering::Release);
        // A new builder's message is not the previous events' message.
        self.slot.metadata_touched.store(true, Ordering::Release);
    }

    pub(crate) fn leave_unfinished(&self, message: Arc<AssistantMessage>) {
        if let Ok(mut unfinished) = self.slot.unfinished.lock() {
            *unfinished = Some(message);
        }
    }

    /// Another sender for the same slot, for a builder given up with `into_sender`: its events
    /// are the producer's own from then on, so their metadata is not tracked.
    pub(crate) fn share(&self) -> Self {
        self.slot.metadata_tracked.store(false, Ordering::Release);
        Self { slot: Arc::clone(&self.slot) }
    }
}

/// What an ended builder holds instead of its message: one shared empty message, so that ending
/// a response allocates nothing.
pub(crate) fn ended_placeholder() -> Arc<AssistantMessage> {
    static PLACEHOLDER: std::sync::OnceLock<Arc<AssistantMessage>> = std::sync::OnceLock::new();
    Arc::clone(PLACEHOLDER.get_or_init(|| Arc::new(AssistantMessage::default())))
}

/// What [`EventSender::send`] returns: on its first poll it hands the event over and stays
/// pending once, while the consumer takes it.
#[derive(Debug)]
#[must_use = "the event is handed over when the future is awaited"]
pub struct SendEvent<'a> {
    slot: &'a Slot,
    event: Option<AssistantMessageEvent>,
}

impl Future for SendEvent<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut TaskContext<'_>) -> Poll<()> {
        let this = &mut *self;
        this.slot.hand_over(&mut this.event)
    }
}

/// What a builder's terminal methods ([`done`](crate::AssistantMessageBuilder::done),
/// [`error`](crate::AssistantMessageBuilder::error), ...) return: [`SendEvent`] with its own
/// handle on the stream, as the builder is gone once it is made.
#[derive(Debug)]
#[must_use = "the event is handed over when the future is awaited"]
pub struct SendOwned {
    slot: Arc<Slot>,
    event: Option<AssistantMessageEvent>,
}

impl Future for SendOwned {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut TaskContext<'_>) -> Poll<()> {
        let this = &mut *self;
        this.slot.hand_over(&mut this.event)
    }
}

impl Slot {
    /// The one step of a send: on the first poll the event goes into the slot and the sender
    /// stays pending once, while the consumer takes it. The producer is only ever polled by its
    /// `ProducerStream`, which takes the event and re-polls on the next `poll_next`, so no
    /// waker is needed for this one yield.
    ///
    /// With a registered consumer, a block event is given to it instead (see [`crate::push`]):
    /// handled, the send is ready at once.
    #[inline]
    fn hand_over(&self, event: &mut Option<AssistantMessageEvent>) -> Poll<()> {
        let Some(value) = event.take() else { return Poll::Ready(()) };
        if !self.builder.load(Ordering::Acquire) {
            observe(&mut self.copy.lock(), &value);
        }
        if let Some(Registered(consumer)) = self.consumer.get() {
            if is_block_event(&value) {
                let metadata_changed = match self.metadata_tracked.load(Ordering::Acquire) {
                    true => self.take_metadata_touched(),
                    false => true,
                };
                let consumed = match consumer.consume(value, metadata_changed) {
                    Consumed::Handled => return Poll::Ready(()),
                    Consumed::Waiting => CONSUMED_WAITING,
                    Consumed::Yield => CONSUMED_YIELD,
                    Consumed::Stop => CONSUMED_STOP,
                };
                self.consumed.store(consumed, Ordering::Release);
                return Poll::Pending;
            }
        }
        self.put(value);
        Poll::Pending
    }

    /// What the consumer did with a pushed event that made the producer wait, if anything
    /// (`CONSUMED_*`; cleared by the look). Without a read-modify-write: the producer only runs
    /// while its stream polls it, never while the stream looks.
    fn take_consumed(&self) -> u8 {
        let consumed = self.consumed.load(Ordering::Acquire);
        if consumed != CONSUMED_NOTHING {
            self.consumed.store(CONSUMED_NOTHING, Ordering::Release);
        }
        consumed
    }
}

/// [`Slot::consumed`]: nothing to act on.
const CONSUMED_NOTHING: u8 = 0;
/// [`Consumed::Waiting`].
const CONSUMED_WAITING: u8 = 1;
/// [`Consumed::Yield`].
const CONSUMED_YIELD: u8 = 2;
/// [`Consumed::Stop`].
const CONSUMED_STOP: u8 = 3;

struct ProducerStream {
    slot: Arc<Slot>,
    future: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// What the consumer's last hand-over left to do (`CONSUMED_*`): while it handles a pushed
    /// event ([`Consumed::Waiting`]) its `poll_ready` is polled, and the producer is not, until
    /// it is ready; after [`Consumed::Stop`] the stream ends.
    consumer: u8,
}

/// The next event of a producer: the one in its slot, or the one it hands over when polled.
#[inline]
fn poll_producer(
    slot: &Slot,
    future: &mut Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    cx: &mut TaskContext<'_>,
    panicked: &mut Option<Panicked>,
) -> Poll<Option<AssistantMessageEvent>> {
    if let Some(event) = slot.take() {
        return Poll::Ready(Some(event));
    }
    let Some(running) = future.as_mut() else { return Poll::Ready(None) };
    match guarded(|| running.as_mut().poll(cx), panicked) {
        Some(Poll::Ready(())) => {
            *future = None;
            Poll::Ready(slot.take())
        }
        Some(Poll::Pending) => match slot.take() {
            Some(event) => Poll::Ready(Some(event)),
            None => Poll::Pending,
        },
        None => Poll::Ready(None),
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

/// Middleware around a [`StreamFn`]: sees each request before the stream function it wraps,
/// may change the model, context or options it hands on, or answer the request itself (a
/// failed stream for a request it cannot send). [`Layered`] puts a layer around a stream
/// function and is itself one, so layers stack.
pub trait StreamLayer: Send + Sync {
    /// Start one request through `inner`.
    fn stream(
        &self,
        inner: &dyn StreamFn,
        model: &Model,
        context: TranscriptContext,
        options: StreamOptions,
    ) -> AssistantMessageEventStream;
}

/// A [`StreamLayer`] around the stream function it wraps: every request goes through the
/// layer, which hands it on to the inner function.
///
/// ```
/// use std::sync::Arc;
/// use pi_types::{AssistantMessageEventStream, Layered, Model, StreamFn, StreamLayer, StreamOptions, TranscriptContext};
///
/// /// A ten-second limit on the response's first byte unless the caller set one.
/// struct DefaultTimeout;
///
/// impl StreamLayer for DefaultTimeout {
///     fn stream(&self, inner: &dyn StreamFn, model: &Model, context: TranscriptContext, mut options: StreamOptions)
///         -> AssistantMessageEventStream {
///         options.timeout_ms.get_or_insert(10_000);
///         inner.stream(model, context, options)
///     }
/// }
///
/// # fn provider() -> Arc<dyn StreamFn> { Arc::new(|_: &Model, _: TranscriptContext, _: StreamOptions| AssistantMessageEventStream::from_events(Vec::new())) }
/// let stream_fn: Arc<dyn StreamFn> = Arc::new(Layered::new(DefaultTimeout, provider()));
/// ```
#[derive(Clone)]
pub struct Layered<L> {
    layer: L,
    inner: Arc<dyn StreamFn>,
}

impl<L> Layered<L> {
    /// `layer` around `inner`.
    pub fn new(layer: L, inner: Arc<dyn StreamFn>) -> Self {
        Self { layer, inner }
    }
}

impl<L: std::fmt::Debug> std::fmt::Debug for Layered<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Layered").field("layer", &self.layer).finish_non_exhaustive()
    }
}

impl<L: StreamLayer> StreamFn for Layered<L> {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        self.layer.stream(&*self.inner, model, context, options)
    }
}
