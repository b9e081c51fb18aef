//! `Consumed::Yield`: the stream is pending once per yielded event, wakes nobody, and goes on
//! at the next poll, for a producer's stream and for a stream of ready events alike.
#![allow(clippy::unwrap_used)]

use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use futures::Stream;
use pi_types::{
    AssistantMessage, AssistantMessageEvent, AssistantMessageEventStream, Consumed, EventConsumer, StopReason,
};

/// Takes every block event and asks the stream to yield; counts its `poll_ready` calls.
#[derive(Default)]
struct Yielding {
    taken: Mutex<Vec<String>>,
    ready_polls: AtomicUsize,
}

impl EventConsumer for Yielding {
    fn consume(&self, event: AssistantMessageEvent, _metadata_changed: bool) -> Consumed {
        let taken = match &event {
            AssistantMessageEvent::TextDelta { delta, .. } => delta.to_string(),
            other => other.type_name().to_owned(),
        };
        self.taken.lock().unwrap().push(taken);
        Consumed::Yield
    }

    fn poll_ready(&self, _cx: &mut Context<'_>) -> Poll<ControlFlow<()>> {
        self.ready_polls.fetch_add(1, Ordering::Relaxed);
        Poll::Ready(ControlFlow::Continue(()))
    }
}

#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn events() -> Vec<AssistantMessageEvent> {
    let partial = Arc::new(AssistantMessage::default());
    let delta = |text: &str| AssistantMessageEvent::TextDelta {
        content_index: 0,
        delta: text.into(),
        partial: Arc::clone(&partial),
    };
    let done = AssistantMessage { stop_reason: StopReason::Stop, ..Default::default() };
    vec![
        AssistantMessageEvent::Start { partial: Arc::clone(&partial) },
        AssistantMessageEvent::TextStart { content_index: 0, partial: Arc::clone(&partial) },
        delta("a"),
        delta("b"),
        AssistantMessageEvent::TextEnd { content_index: 0, content: "ab".into(), partial: Arc::clone(&partial) },
        AssistantMessageEvent::Done { reason: StopReason::Stop, message: Arc::new(done) },
    ]
}

/// Polls `stream` by hand to its end: what each poll gave (`"pending"` or the event's type).
fn polls(mut stream: AssistantMessageEventStream, waker: &Arc<CountingWaker>) -> Vec<&'static str> {
    let waker = Waker::from(Arc::clone(waker));
    let mut cx = Context::from_waker(&waker);
    // `start` comes before the consumer is registered, as the loop registers it.
    let first = Pin::new(&mut stream).poll_next(&mut cx);
    assert!(matches!(first, Poll::Ready(Some(AssistantMessageEvent::Start { .. }))));
    let consumer = Arc::new(Yielding::default());
    assert!(stream.push_to(consumer.clone()));
    let mut seen = Vec::new();
    for _ in 0..20 {
        match Pin::new(&mut stream).poll_next(&mut cx) {
            Poll::Pending => seen.push("pending"),
            Poll::Ready(Some(event)) => seen.push(event.type_name()),
            Poll::Ready(None) => break,
        }
    }
    assert_eq!(*consumer.taken.lock().unwrap(), ["text_start", "a", "b", "text_end"]);
    assert_eq!(consumer.ready_polls.load(Ordering::Relaxed), 0, "a yield needs no poll_ready");
    seen
}

#[test]
fn a_yield_is_one_pending_poll_that_wakes_nobody() {
    let expected = ["pending", "pending", "pending", "pending", "done"];

    let waker = Arc::new(CountingWaker::default());
    let produced = AssistantMessageEventStream::from_producer(|tx| async move {
        for event in events() {
            tx.send(event).await;
        }
    });
    assert_eq!(polls(produced, &waker), expected);

    let ready = AssistantMessageEventStream::from_events(events());
    assert_eq!(polls(ready, &waker), expected);

    assert_eq!(waker.0.load(Ordering::Relaxed), 0);
}
