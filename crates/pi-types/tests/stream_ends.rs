//! How a stream ends when a source panics, and when its response is timed, through the public
//! constructors: a producer, a wrapped stream, a deferred start and a pushed consumer.
#![allow(clippy::unwrap_used)]

use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use pi_types::{
    AssistantMessage, AssistantMessageEvent, AssistantMessageEventStream, Consumed, EventConsumer, StopReason,
};

fn ended(timestamp: u64) -> AssistantMessageEvent {
    let message = AssistantMessage { stop_reason: StopReason::Stop, timestamp, ..Default::default() };
    AssistantMessageEvent::Done { reason: StopReason::Stop, message: Arc::new(message) }
}

fn started(timestamp: u64) -> AssistantMessageEvent {
    AssistantMessageEvent::Start { partial: Arc::new(AssistantMessage { timestamp, ..Default::default() }) }
}

fn next(stream: &mut AssistantMessageEventStream) -> Option<AssistantMessageEvent> {
    futures_executor::block_on(std::future::poll_fn(|cx| Pin::new(&mut *stream).poll_next(cx)))
}

/// Drains `stream`: the types of the events it yielded, and its panic message.
fn drain(mut stream: AssistantMessageEventStream) -> (Vec<&'static str>, Option<String>) {
    let mut yielded = Vec::new();
    while let Some(event) = next(&mut stream) {
        yielded.push(event.type_name());
    }
    (yielded, stream.panic_message().map(str::to_owned))
}

fn duration_of(events: Vec<AssistantMessageEvent>) -> Option<u64> {
    let stream = AssistantMessageEventStream::from_events(events);
    futures_executor::block_on(stream.result()).and_then(|m| m.duration_ms)
}

#[test]
fn a_response_that_started_here_is_timed_whenever_it_was_stamped() {
    let now = pi_types::now_ms();
    // Stamped before the stream was created, but started in it.
    assert!(duration_of(vec![started(now - 1_000), ended(now - 1_000)]).is_some());
    // Ending without `start` (a request that failed early), stamped after the stream's creation.
    assert!(duration_of(vec![ended(now + 1_000)]).is_some());
}

#[test]
fn a_forwarded_response_stays_untimed() {
    assert_eq!(duration_of(vec![ended(400)]), None);
    let timed = AssistantMessage { duration_ms: Some(7), timestamp: 1_000, ..Default::default() };
    let event = AssistantMessageEvent::Done { reason: StopReason::Stop, message: Arc::new(timed) };
    assert_eq!(duration_of(vec![started(1_000), event]), Some(7));
}

#[test]
fn from_producer_starts_the_clock_before_the_producer_runs() {
    let stream = AssistantMessageEventStream::from_producer(|tx| {
        let stamped = pi_types::now_ms();
        async move { tx.send(ended(stamped)).await }
    });
    let message = futures_executor::block_on(stream.result());
    assert!(message.and_then(|m| m.duration_ms).is_some());
}

#[test]
fn a_panic_in_any_source_ends_the_stream_with_its_message() {
    let producer = AssistantMessageEventStream::from_producer(|tx| async move {
        tx.send(started(1)).await;
        panic!("producer exploded");
    });
    assert_eq!(drain(producer), (vec!["start"], Some("producer exploded".to_owned())));

    let mut polls = 0;
    let wrapped = AssistantMessageEventStream::new(futures::stream::poll_fn(move |_| {
        polls += 1;
        match polls {
            1 => Poll::Ready(Some(started(1))),
            _ => panic!("wrapped stream exploded"),
        }
    }));
    assert_eq!(drain(wrapped), (vec!["start"], Some("wrapped stream exploded".to_owned())));

    let deferred = AssistantMessageEventStream::deferred(async { panic!("start exploded") });
    assert_eq!(drain(deferred), (vec![], Some("start exploded".to_owned())));
}

#[test]
fn a_panicking_consumer_ends_the_stream_with_its_message() {
    struct Exploding;
    impl EventConsumer for Exploding {
        fn consume(&self, _event: AssistantMessageEvent, _metadata_changed: bool) -> Consumed {
            panic!("consumer exploded")
        }
        fn poll_ready(&self, _cx: &mut Context<'_>) -> Poll<ControlFlow<()>> {
            Poll::Ready(ControlFlow::Continue(()))
        }
    }
    let delta = || {
        let partial = Arc::new(AssistantMessage::default());
        AssistantMessageEvent::TextDelta { content_index: 0, delta: "x".into(), partial }
    };
    let producer = AssistantMessageEventStream::from_producer(move |tx| async move {
        tx.send(started(1)).await;
        tx.send(delta()).await;
        tx.send(ended(1)).await;
    });
    let wrapped = AssistantMessageEventStream::from_events([started(1), delta(), ended(1)]);
    for mut stream in [producer, wrapped] {
        assert_eq!(next(&mut stream).map(|e| e.type_name()), Some("start"));
        assert!(stream.push_to(Arc::new(Exploding)));
        assert_eq!(drain(stream), (vec![], Some("consumer exploded".to_owned())));
    }
}
