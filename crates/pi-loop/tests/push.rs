//! Pushed updates (a sink that `delivers_updates`) give the run exactly what pulled ones give:
//! the same events in the same order, the same transcript, the same failure, whether the sink
//! answers at once or asynchronously, fails, panics or cancels the run mid-response.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pi_loop::{run_agent_loop, AgentContext, AgentEventSink, EmitFuture, LoopConfig, LoopError, UpdateDelivery};
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

/// Records every event as JSON; pushed or pulled, synchronous or asynchronous.
struct Recorder {
    events: Mutex<Vec<serde_json::Value>>,
    /// How many updates came by value (pushed).
    pushed: AtomicUsize,
    push: bool,
    asynchronous: bool,
    twist: Twist,
    cancel: CancellationToken,
}

impl Recorder {
    fn new(push: bool, asynchronous: bool, twist: Twist, cancel: CancellationToken) -> Arc<Self> {
        Arc::new(Self { events: Mutex::default(), pushed: AtomicUsize::new(0), push, asynchronous, twist, cancel })
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
    fn emit<'a>(&'a self, event: &'a AgentEvent) -> EmitFuture<'a> {
        if !self.0.asynchronous {
            return EmitFuture::ready(self.0.record(event));
        }
        EmitFuture::boxed(async move {
            tokio::task::yield_now().await;
            self.0.record(event)
        })
    }

    fn delivers_updates(&self) -> bool {
        self.0.push
    }

    fn deliver_update(&self, event: AgentEvent, _metadata_changed: bool) -> UpdateDelivery {
        self.0.pushed.fetch_add(1, Ordering::Relaxed);
        if !self.0.asynchronous {
            return UpdateDelivery::Done(self.0.record(&event));
        }
        let recorder = Arc::clone(&self.0);
        UpdateDelivery::Pending(Box::pin(async move {
            tokio::task::yield_now().await;
            recorder.record(&event)
        }))
    }
}

/// The events, the run's outcome, and how many updates were pushed.
type Run = (Vec<serde_json::Value>, Result<usize, String>, usize);

async fn run(push: bool, asynchronous: bool, twist: Twist) -> Run {
    let cancel = CancellationToken::new();
    let recorder = Recorder::new(push, asynchronous, twist, cancel.clone());
    let config = LoopConfig::new(Arc::new(Model::new("m", "api", "p")), Arc::new(scripted));
    let prompts = vec![AgentMessage::from(UserMessage::text("hi"))];
    let sink: Arc<dyn AgentEventSink> = Arc::new(Sink(Arc::clone(&recorder)));
    let outcome = run_agent_loop(prompts, AgentContext::default(), config, sink, cancel).await;
    let outcome = outcome.map(|messages| messages.len()).map_err(|error: LoopError| error.to_string());
    (recorder.events(), outcome, recorder.pushed.load(Ordering::Relaxed))
}

async fn same_either_way(asynchronous: bool, twist: Twist) -> Run {
    let pulled = run(false, asynchronous, twist).await;
    let pushed = run(true, asynchronous, twist).await;
    assert_eq!(pulled.2, 0);
    // Every update after a response's start is pushed, up to the one that failed the run.
    assert_eq!(pushed.2, updates(&pushed.0), "pushed updates");
    assert_eq!(pushed.1, pulled.1);
    assert_eq!(pushed.0.len(), pulled.0.len());
    for (index, (pushed, pulled)) in pushed.0.iter().zip(&pulled.0).enumerate() {
        // Timestamps and durations differ between two runs; everything else must not.
        let (mut pushed, mut pulled) = (pushed.clone(), pulled.clone());
        for event in [&mut pushed, &mut pulled] {
            strip_times(event);
        }
        assert_eq!(pushed, pulled, "event {index}");
    }
    pulled
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
    let (events, outcome, _) = same_either_way(false, Twist::None).await;
    // First response: three thinking, four text and two argument deltas, with the starts and
    // ends of three blocks; the second: the same without the tool call.
    assert_eq!(updates(&events), 15 + 11);
    assert_eq!(outcome, Ok(4), "user, assistant, tool result, assistant");
}

#[tokio::test]
async fn an_asynchronous_sink_holds_the_provider_and_sees_the_same_run() {
    let (events, outcome, _) = same_either_way(true, Twist::None).await;
    assert_eq!(updates(&events), 15 + 11);
    assert!(outcome.is_ok());
}

#[tokio::test]
async fn a_failing_sink_fails_the_run_at_the_same_event() {
    for asynchronous in [false, true] {
        let (events, outcome, _) = same_either_way(asynchronous, Twist::Fail(6)).await;
        assert_eq!(updates(&events), 6);
        assert_eq!(outcome, Err(LoopError::Sink("listener failed".into()).to_string()));
    }
}

#[tokio::test]
async fn a_panicking_sink_fails_the_run_at_the_same_event() {
    let (events, outcome, _) = same_either_way(false, Twist::Panic(3)).await;
    assert_eq!(updates(&events), 3);
    assert!(outcome.is_err_and(|error| error.contains("listener panicked")));
}

#[tokio::test]
async fn a_cancellation_raised_by_the_sink_stops_the_provider_at_the_same_delta() {
    for asynchronous in [false, true] {
        let (events, outcome, _) = same_either_way(asynchronous, Twist::Cancel(7)).await;
        let last = events.iter().rev().find(|e| e["type"] == "message_end").unwrap();
        assert_eq!(last["message"]["stopReason"], "aborted");
        assert!(outcome.is_ok());
    }
}

/// The `Stream` form's updates are pushed into its handoff: the consumer still takes them one
/// at a time, the same as a pulled run's, and a cancellation it raises between two updates stops
/// the provider at the same delta.
#[tokio::test]
async fn the_stream_form_yields_the_same_run() {
    use futures::StreamExt;
    for twist in [Twist::None, Twist::Cancel(7)] {
        let (pulled, pulled_outcome, _) = run(false, false, twist).await;
        let cancel = CancellationToken::new();
        let config = LoopConfig::new(Arc::new(Model::new("m", "api", "p")), Arc::new(scripted));
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

/// A sink's failure ends the run at once, pushed or pulled, synchronous or not: the loop does
/// not wait for the provider's next event to report it. The run is polled by hand, with a waker
/// that wakes nothing: it must finish although the provider never sends again.
#[tokio::test]
async fn a_failure_is_reported_without_waiting_for_the_provider() {
    for (push, asynchronous) in [(false, false), (true, false), (false, true), (true, true)] {
        let cancel = CancellationToken::new();
        // The last update before the stall fails: text_start and three deltas.
        let recorder = Recorder::new(push, asynchronous, Twist::Fail(4), cancel.clone());
        let config = LoopConfig::new(Arc::new(Model::new("m", "api", "p")), Arc::new(stalling));
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
        let Some(outcome) = outcome else { panic!("push {push}, asynchronous {asynchronous}: the run waits") };
        assert_eq!(outcome.map(|m| m.len()).map_err(|e| e.to_string()), Err("listener failed".to_string()));
        assert_eq!(updates(&recorder.events()), 4);
    }
}
