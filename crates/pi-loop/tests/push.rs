//! Updates are delivered from inside the provider's stream, whatever the stream is (a producer's
//! with a builder, or ready events): the run gets the same events in the same order, the same
//! transcript, the same failure, whether the sink answers at once or asynchronously, fails,
//! panics or cancels the run mid-response.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pi_loop::{run_agent_loop, AgentContext, AgentEventSink, Delivery, EventInfo, LoopConfig, LoopError};
use pi_types::{
    AgentEvent, AgentMessage, AssistantMessageBuilder, AssistantMessageEventStream, BoxError, CancellationToken,
    Message, Model, StopReason, StreamOptions, TranscriptContext, UserMessage,
};

/// A builder-made response: thinking, text and (on the first request) a tool call, each in
/// several pieces; the request ends early (`aborted`) once it is cancelled.
fn scripted(model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
    let model = model.clone();
    let first = !context.messages().iter().any(|message| matches!(message, Message::ToolResult(_)));
    AssistantMessageEventStream::from_producer(move |tx| async move {
        let cancelled = || options.cancel.as_ref().is_some_and(CancellationToken::is_cancelled);
        let mut out = AssistantMessageBuilder::for_model(tx, &model);
        out.start().await;
        let thinking = out.start_thinking().await;
        for piece in ["Let ", "me ", "think."] {
            out.thinking_delta(thinking, piece).await.unwrap();
        }
        out.end_thinking(thinking).await.unwrap();
        let text = out.start_text().await;
        for piece in ["one ", "two ", "three ", "four"] {
            if cancelled() {
                return out.aborted("Request was aborted").await;
            }
            out.text_delta(text, piece).await.unwrap();
        }
        out.end_text(text).await.unwrap();
        if !first {
            return out.done(StopReason::Stop).await;
        }
        let call = out.start_tool_call("call_1", "missing_tool").await;
        for piece in [r#"{"a""#, r#":1}"#] {
            out.tool_call_delta(call, piece).await.unwrap();
        }
        out.end_tool_call(call).await.unwrap();
        out.done(StopReason::ToolUse).await;
    })
}

/// What a sink does when it sees its `nth` update.
#[derive(Clone, Copy)]
enum Twist {
    None,
    Fail(usize),
    Panic(usize),
    Cancel(usize),
}

/// The same response as ready events: a stream that is not a producer's.
fn replayed(model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
    let events: Vec<_> = futures_executor::block_on(futures::StreamExt::collect(scripted(model, context, options)));
    AssistantMessageEventStream::from_events(events)
}

/// Records every event as JSON; synchronous or asynchronous.
struct Recorder {
    events: Mutex<Vec<serde_json::Value>>,
    /// How many events were delivered.
    delivered: AtomicUsize,
    asynchronous: bool,
    twist: Twist,
    cancel: CancellationToken,
}

impl Recorder {
    fn new(asynchronous: bool, twist: Twist, cancel: CancellationToken) -> Arc<Self> {
        Arc::new(Self { events: Mutex::default(), delivered: AtomicUsize::new(0), asynchronous, twist, cancel })
    }

    fn record(&self, event: &AgentEvent) -> Result<(), BoxError> {
        let mut events = self.events.lock().unwrap();
        events.push(serde_json::to_value(event).unwrap());
        let updates = events.iter().filter(|e| e["type"] == "message_update").count();
        drop(events);
        match self.twist {
            Twist::Fail(n) if updates == n => Err("listener failed".into()),
            Twist::Panic(n) if updates == n => panic!("listener panicked"),
            Twist::Cancel(n) if updates == n => {
                self.cancel.cancel();
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn events(&self) -> Vec<serde_json::Value> {
        self.events.lock().unwrap().clone()
    }
}

/// The sink the loop sees, holding the recorder (owned futures need an `Arc`).
struct Sink(Arc<Recorder>);

impl AgentEventSink for Sink {
    fn deliver(&self, event: AgentEvent, _info: EventInfo) -> Delivery {
        self.0.delivered.fetch_add(1, Ordering::Relaxed);
        if !self.0.asynchronous {
            return Delivery::ready(self.0.record(&event));
        }
        let recorder = Arc::clone(&self.0);
        Delivery::pending(async move {
            tokio::task::yield_now().await;
            recorder.record(&event)
        })
    }
}

/// The events and the run's outcome.
type Run = (Vec<serde_json::Value>, Result<usize, String>);

/// A sink that hands each event on to another sink and awaits that delivery.
struct Forward(Sink);

impl AgentEventSink for Forward {
    fn deliver(&self, event: AgentEvent, info: EventInfo) -> Delivery {
        let inner = self.0.deliver(event, info);
        Delivery::pending(async move { inner.await.map_err(BoxError::from) })
    }
}

async fn run(ready_events: bool, asynchronous: bool, twist: Twist) -> Run {
    run_through(ready_events, asynchronous, twist, false).await
}

/// [`run`], through a [`Forward`] sink if `forward`.
async fn run_through(ready_events: bool, asynchronous: bool, twist: Twist, forward: bool) -> Run {
    let cancel = CancellationToken::new();
    let recorder = Recorder::new(asynchronous, twist, cancel.clone());
    let stream_fn: Arc<dyn pi_types::StreamFn> = match ready_events {
        true => Arc::new(replayed),
        false => Arc::new(scripted),
    };
    let config = LoopConfig::new(Arc::new(Model::new("m").with_api("api").with_provider("p")), stream_fn);
    let prompts = vec![AgentMessage::from(UserMessage::text("hi"))];
    let sink: Arc<dyn AgentEventSink> = match forward {
        true => Arc::new(Forward(Sink(Arc::clone(&recorder)))),
        false => Arc::new(Sink(Arc::clone(&recorder))),
    };
    let outcome = run_agent_loop(prompts, AgentContext::default(), config, sink, cancel).await;
    let outcome = outcome.map(|messages| messages.len()).map_err(|error: LoopError| error.to_string());
    let events = recorder.events();
    // Each event is delivered once (one that failed the run is delivered, not recorded twice).
    assert_eq!(recorder.delivered.load(Ordering::Relaxed), events.len());
    (events, outcome)
}

fn assert_same_run(mine: &Run, theirs: &Run) {
    assert_eq!(mine.1, theirs.1);
    assert_eq!(mine.0.len(), theirs.0.len());
    for (index, (mine, theirs)) in mine.0.iter().zip(&theirs.0).enumerate() {
        // Timestamps and durations differ between two runs; everything else must not.
        let (mut mine, mut theirs) = (mine.clone(), theirs.clone());
        for event in [&mut mine, &mut theirs] {
            strip_times(event);
        }
        assert_eq!(mine, theirs, "event {index}");
    }
}

/// The run with a synchronous sink, checked against an asynchronous one and (when the twist
/// does not depend on the provider seeing a cancellation) against the same response as ready
/// events.
async fn same_either_way(twist: Twist) -> Run {
    let synchronous = run(false, false, twist).await;
    assert_same_run(&run(false, true, twist).await, &synchronous);
    if !matches!(twist, Twist::Cancel(_)) {
        assert_same_run(&run(true, false, twist).await, &synchronous);
        assert_same_run(&run(true, true, twist).await, &synchronous);
    }
    synchronous
}

fn strip_times(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.shift_remove("timestamp");
            map.shift_remove("durationMs");
            map.values_mut().for_each(strip_times);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_times),
        _ => {}
    }
}

fn updates(events: &[serde_json::Value]) -> usize {
    events.iter().filter(|e| e["type"] == "message_update").count()
}

#[tokio::test]
async fn a_synchronous_sink_sees_the_same_run() {
    let (events, outcome) = same_either_way(Twist::None).await;
    // First response: three thinking, four text and two argument deltas, with the starts and
    // ends of three blocks; the second: the same without the tool call.
    assert_eq!(updates(&events), 15 + 11);
    assert_eq!(outcome, Ok(4), "user, assistant, tool result, assistant");
}

#[tokio::test]
async fn a_failing_sink_fails_the_run_at_the_same_event() {
    let (events, outcome) = same_either_way(Twist::Fail(6)).await;
    assert_eq!(updates(&events), 6);
    assert_eq!(outcome, Err(LoopError::Sink("listener failed".into()).to_string()));
}

#[tokio::test]
async fn a_sink_that_forwards_awaits_the_delivery_it_forwards() {
    for asynchronous in [false, true] {
        let (events, outcome) = run_through(false, asynchronous, Twist::Fail(6), true).await;
        let direct = run(false, asynchronous, Twist::Fail(6)).await;
        assert_same_run(&(events, Ok(0)), &(direct.0, Ok(0)));
        // The inner delivery's failure, as the run's, is the outer sink's failure.
        let inner = LoopError::Sink("listener failed".into()).to_string();
        assert_eq!(outcome, Err(LoopError::Sink(inner).to_string()));
    }
}

#[tokio::test]
async fn a_panicking_sink_fails_the_run_at_the_same_event() {
    let (events, outcome) = same_either_way(Twist::Panic(3)).await;
    assert_eq!(updates(&events), 3);
    assert!(outcome.is_err_and(|error| error.contains("listener panicked")));
}

#[tokio::test]
async fn a_cancellation_raised_by_the_sink_stops_the_provider_at_the_same_delta() {
    let (events, outcome) = same_either_way(Twist::Cancel(7)).await;
    let last = events.iter().rev().find(|e| e["type"] == "message_end").unwrap();
    assert_eq!(last["message"]["stopReason"], "aborted");
    assert!(outcome.is_ok());
}

/// The `Stream` form's handoff is one more sink: the consumer takes the updates one at a time,
/// the same as a callback sink's, and a cancellation it raises between two updates stops the
/// provider at the same delta.
#[tokio::test]
async fn the_stream_form_yields_the_same_run() {
    use futures::StreamExt;
    for twist in [Twist::None, Twist::Cancel(7)] {
        let (pulled, pulled_outcome) = run(false, false, twist).await;
        let cancel = CancellationToken::new();
        let config = LoopConfig::new(Arc::new(Model::new("m").with_api("api").with_provider("p")), Arc::new(scripted));
        let prompts = vec![AgentMessage::from(UserMessage::text("hi"))];
        let mut stream = pi_loop::agent_loop(prompts, AgentContext::default(), config, cancel.clone());
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            events.push(serde_json::to_value(&event).unwrap());
            if matches!(twist, Twist::Cancel(n) if updates(&events) == n) {
                cancel.cancel();
            }
        }
        let outcome = stream.result().await.map(|messages| messages.len()).map_err(|error| error.to_string());
        assert_eq!(outcome, pulled_outcome);
        assert_eq!(events.len(), pulled.len());
        for (index, (mut mine, mut theirs)) in events.into_iter().zip(pulled).enumerate() {
            strip_times(&mut mine);
            strip_times(&mut theirs);
            assert_eq!(mine, theirs, "event {index}");
        }
    }
}

/// A provider that streams three pieces and then waits for ever (a stalled connection).
fn stalling(model: &Model, _context: TranscriptContext, _options: StreamOptions) -> AssistantMessageEventStream {
    let model = model.clone();
    AssistantMessageEventStream::from_producer(move |tx| async move {
        let mut out = AssistantMessageBuilder::for_model(tx, &model);
        out.start().await;
        let text = out.start_text().await;
        for piece in ["one ", "two ", "three "] {
            out.text_delta(text, piece).await.unwrap();
        }
        std::future::pending::<()>().await;
    })
}

/// A sink's failure ends the run at once, synchronous or not: the loop does
/// not wait for the provider's next event to report it. The run is polled by hand, with a waker
/// that wakes nothing: it must finish although the provider never sends again.
#[tokio::test]
async fn a_failure_is_reported_without_waiting_for_the_provider() {
    for asynchronous in [false, true] {
        let cancel = CancellationToken::new();
        // The last update before the stall fails: text_start and three deltas.
        let recorder = Recorder::new(asynchronous, Twist::Fail(4), cancel.clone());
        let config = LoopConfig::new(Arc::new(Model::new("m").with_api("api").with_provider("p")), Arc::new(stalling));
        let prompts = vec![AgentMessage::from(UserMessage::text("hi"))];
        let sink: Arc<dyn AgentEventSink> = Arc::new(Sink(Arc::clone(&recorder)));
        let mut run = Box::pin(run_agent_loop(prompts, AgentContext::default(), config, sink, cancel));
        let waker = futures::task::noop_waker();
        let mut context = std::task::Context::from_waker(&waker);
        // Each poll gets past at least one yield of an asynchronous sink.
        let outcome = (0..1_000).find_map(|_| match run.as_mut().poll(&mut context) {
            std::task::Poll::Ready(outcome) => Some(outcome),
            std::task::Poll::Pending => None,
        });
        let Some(outcome) = outcome else { panic!("asynchronous {asynchronous}: the run waits") };
        assert_eq!(outcome.map(|m| m.len()).map_err(|e| e.to_string()), Err("listener failed".to_string()));
        assert_eq!(updates(&recorder.events()), 4);
    }
}

/// A provider is user code: whether it panics while starting the request or while streaming,
/// the response ends as an error message with the panic's text (what was streamed kept), and
/// the run goes on to `agent_end` instead of taking the caller's task down.
#[tokio::test]
async fn a_panicking_provider_ends_its_response_as_an_error() {
    fn panics_at_once(_: &Model, _: TranscriptContext, _: StreamOptions) -> AssistantMessageEventStream {
        panic!("provider failed to start")
    }
    fn panics_midway(model: &Model, _: TranscriptContext, _: StreamOptions) -> AssistantMessageEventStream {
        let model = model.clone();
        AssistantMessageEventStream::from_producer(move |tx| async move {
            let mut out = AssistantMessageBuilder::for_model(tx, &model);
            out.start().await;
            let text = out.start_text().await;
            out.text_delta(text, "partial ").await.unwrap();
            panic!("provider failed midway");
        })
    }
    let cases: [(Arc<dyn pi_types::StreamFn>, &str, &str); 2] = [
        (Arc::new(panics_at_once), "provider failed to start", ""),
        (Arc::new(panics_midway), "provider failed midway", "partial "),
    ];
    for (stream_fn, reason, text) in cases {
        let recorder = Recorder::new(false, Twist::None, CancellationToken::new());
        let config = LoopConfig::new(Arc::new(Model::new("m").with_api("api").with_provider("p")), stream_fn);
        let prompts = vec![AgentMessage::from(UserMessage::text("hi"))];
        let sink: Arc<dyn AgentEventSink> = Arc::new(Sink(Arc::clone(&recorder)));
        let messages =
            run_agent_loop(prompts, AgentContext::default(), config, sink, CancellationToken::new()).await.unwrap();
        let AgentMessage::Assistant(last) = messages.last().unwrap() else { panic!("an assistant message") };
        assert_eq!(last.stop_reason, StopReason::Error);
        assert_eq!(last.error_message.as_deref(), Some(reason));
        assert_eq!(last.text(), text);
        let events = recorder.events();
        assert_eq!(events.last().unwrap()["type"], "agent_end");
    }
}
