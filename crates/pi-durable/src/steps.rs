//! The run's steps, as the loop sees them and as the journal records them.
//!
//! The loop needs `'static` providers, tools and sinks; a Restate handler's context is
//! borrowed for the handler's duration. So the stream function, every tool and the event
//! sink given to the loop are proxies: each step they take is sent over a channel to the
//! handler, which performs it inside `ctx.run` (or as a call to the session's inbox) and
//! sends the journaled value back. A step runs its work only when the journal does not hold
//! its result yet; on replay its work is dropped unrun and the recorded value comes back.
//!
//! The loop is deterministic given the values its steps return, so a replay sends the same
//! steps in the same order, which is what Restate requires of a journal.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::StreamExt;
use pi_loop::{AgentEventSink, Delivery, EventInfo};
use pi_types::{
    AgentEvent, AgentMessage, AgentTool, AgentToolResult, AssistantMessage, AssistantMessageEvent,
    AssistantMessageEventStream, BoxError, CancellationToken, JsonObject, Model, StopReason, StreamFn, StreamOptions,
    ToolSpec, ToolUpdateFn, TranscriptContext,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// The work of one journaled step: run only when the journal lacks its result.
pub(crate) type Work = Box<dyn FnOnce() -> BoxFuture<'static, Value> + Send>;

/// Which of the session's inbox queues a poll drains.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Queue {
    Steering,
    FollowUp,
}

/// One step the handler performs for the loop.
pub(crate) enum Step {
    /// A `ctx.run` named `name` whose journaled value goes back through `reply`.
    Run { name: String, work: Work, reply: oneshot::Sender<Value> },
    /// Take the messages waiting in one of the session's inbox queues.
    Drain { queue: Queue, reply: oneshot::Sender<Vec<AgentMessage>> },
}

/// The loop's side of the step channel.
#[derive(Clone)]
pub(crate) struct Steps(mpsc::UnboundedSender<Step>);

impl Steps {
    pub(crate) fn channel() -> (Self, mpsc::UnboundedReceiver<Step>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self(tx), rx)
    }

    /// The journaled value of a step; `None` when the handler gave it up (the run was cancelled).
    async fn run(&self, name: String, work: Work) -> Option<Value> {
        let (reply, answer) = oneshot::channel();
        self.0.send(Step::Run { name, work, reply }).ok()?;
        answer.await.ok()
    }

    /// The messages waiting in `queue` (none once the run was cancelled).
    pub(crate) async fn drain(&self, queue: Queue) -> Vec<AgentMessage> {
        let (reply, answer) = oneshot::channel();
        if self.0.send(Step::Drain { queue, reply }).is_err() {
            return Vec::new();
        }
        answer.await.unwrap_or_default()
    }
}

/// The stop reason's text when the handler gave a response up (the run was cancelled).
const ABORTED: &str = "Request aborted by user";

/// A stream function whose responses are journaled steps.
///
/// Live, the inner provider's events are forwarded as they stream and the terminal event
/// waits for the journal to hold the final message. Replayed, the response is its `start` and
/// its terminal event, both from the journaled message (no block events).
pub(crate) struct DurableStreamFn {
    pub(crate) inner: Arc<dyn StreamFn>,
    pub(crate) steps: Steps,
}

impl StreamFn for DurableStreamFn {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        let inner = Arc::clone(&self.inner);
        let steps = self.steps.clone();
        let model = model.clone();
        AssistantMessageEventStream::from_producer(move |tx| async move {
            let (events, mut live) = mpsc::unbounded_channel();
            let fallback = AssistantMessage {
                api: model.api.clone(),
                provider: model.provider.clone(),
                model: model.id.clone(),
                ..Default::default()
            };
            let work: Work = Box::new(move || Box::pin(respond(inner, model, context, options, events)));
            let journaled = steps.run("model".into(), work);
            let mut journaled = std::pin::pin!(journaled);
            let mut started = false;
            // Forward live events until the work ends (its sender dropped); a replay drops the
            // work unrun, so the channel closes at once.
            let value = loop {
                tokio::select! {
                    biased;
                    event = live.recv() => match event {
                        Some(event) => {
                            started = true;
                            tx.send(event).await;
                        }
                        None => break (&mut journaled).await,
                    },
                    value = &mut journaled => {
                        // The work ended: forward what it left in the channel first.
                        while let Ok(event) = live.try_recv() {
                            started = true;
                            tx.send(event).await;
                        }
                        break value;
                    }
                }
            };
            let message = value.and_then(|v| serde_json::from_value::<AssistantMessage>(v).ok()).unwrap_or_else(|| {
                AssistantMessage { stop_reason: StopReason::Aborted, error_message: Some(ABORTED.into()), ..fallback }
            });
            let message = Arc::new(message);
            if !started {
                let partial = AssistantMessage { content: Vec::new(), ..(*message).clone() };
                tx.send(AssistantMessageEvent::Start { partial: Arc::new(partial) }).await;
            }
            let reason = message.stop_reason;
            let terminal = match reason {
                StopReason::Error | StopReason::Aborted => AssistantMessageEvent::Error { reason, error: message },
                _ => AssistantMessageEvent::Done { reason, message },
            };
            tx.send(terminal).await;
        })
    }
}

/// Stream one response from the inner provider, forwarding every event but the terminal one;
/// the final message, as JSON, is the step's value.
async fn respond(
    inner: Arc<dyn StreamFn>,
    model: Model,
    context: TranscriptContext,
    options: StreamOptions,
    events: mpsc::UnboundedSender<AssistantMessageEvent>,
) -> Value {
    let mut stream = inner.stream(&model, context, options);
    let mut last: Option<Arc<AssistantMessage>> = None;
    while let Some(event) = stream.next().await {
        match event {
            AssistantMessageEvent::Done { message, .. } => return to_value(&*message),
            AssistantMessageEvent::Error { error, .. } => return to_value(&*error),
            other => {
                last = other.partial().cloned();
                // The receiver is gone only when the run was dropped.
                let _ = events.send(other);
            }
        }
    }
    let unfinished = stream.take_unfinished().or(last);
    let base = unfinished.map(|m| (*m).clone()).unwrap_or_else(|| AssistantMessage {
        api: model.api.clone(),
        provider: model.provider.clone(),
        model: model.id.clone(),
        timestamp: pi_types::now_ms(),
        ..Default::default()
    });
    let reason = stream.panic_message().unwrap_or("Stream ended without a terminal event").to_owned();
    to_value(&AssistantMessage { stop_reason: StopReason::Error, error_message: Some(reason.into()), ..base })
}

fn to_value(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// A tool whose executions are journaled steps: a call whose result the journal holds is not
/// run again. Progress updates reach the loop from live executions only.
pub(crate) struct DurableTool {
    pub(crate) inner: Arc<dyn AgentTool>,
    pub(crate) steps: Steps,
}

/// A tool's outcome as the journal records it: its result, or its error's text.
#[derive(serde::Serialize, serde::Deserialize)]
// Built once per call and serialized at once: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum ToolOutcome {
    Ok(AgentToolResult),
    Err(String),
}

impl AgentTool for DurableTool {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    fn prepare_arguments(&self, arguments: &JsonObject) -> Option<JsonObject> {
        self.inner.prepare_arguments(arguments)
    }

    fn execute(
        &self,
        call_id: String,
        args: Value,
        cancel: CancellationToken,
        on_update: ToolUpdateFn,
    ) -> BoxFuture<'static, Result<AgentToolResult, BoxError>> {
        let inner = Arc::clone(&self.inner);
        let steps = self.steps.clone();
        let name = format!("tool {}", inner.spec().name());
        Box::pin(async move {
            let work: Work = Box::new(move || {
                Box::pin(async move {
                    let outcome = match inner.execute(call_id, args, cancel, on_update).await {
                        Ok(result) => ToolOutcome::Ok(result),
                        Err(error) => ToolOutcome::Err(error.to_string()),
                    };
                    to_value(&outcome)
                })
            });
            let value = steps.run(name, work).await.ok_or_else(|| BoxError::from(ABORTED))?;
            match serde_json::from_value::<ToolOutcome>(value) {
                Ok(ToolOutcome::Ok(result)) => Ok(result),
                Ok(ToolOutcome::Err(message)) => Err(BoxError::from(message)),
                Err(error) => Err(BoxError::from(format!("Journaled tool result unreadable: {error}"))),
            }
        })
    }
}

/// A listener of a durable run's events: the session id and the event.
pub type Subscriber = Arc<dyn Fn(&str, &AgentEvent) + Send + Sync>;

/// The run's sink: hands every event to the subscribers and records each message as it ends.
///
/// Messages the loop makes itself (tool results, tool-declaration system messages) carry the
/// time they were made and a measured duration: each is journaled when it ends, so a replay
/// records the first execution's copy. An assistant message is recorded as it ends: it is the
/// journaled response with what the loop deterministically adds.
pub(crate) struct RecordingSink {
    pub(crate) session: Arc<str>,
    pub(crate) subscribers: Arc<[Subscriber]>,
    pub(crate) steps: Steps,
    pub(crate) recorded: Arc<Mutex<Vec<AgentMessage>>>,
}

impl AgentEventSink for RecordingSink {
    fn deliver(&self, event: AgentEvent, _info: EventInfo) -> Delivery {
        for subscriber in self.subscribers.iter() {
            subscriber(&self.session, &event);
        }
        let AgentEvent::MessageEnd { message } = event else {
            return Delivery::done();
        };
        if matches!(message, AgentMessage::Assistant(_) | AgentMessage::User(_)) {
            push(&self.recorded, message);
            return Delivery::done();
        }
        let steps = self.steps.clone();
        let recorded = Arc::clone(&self.recorded);
        Delivery::pending(async move {
            let copy = to_value(&message);
            let work: Work = Box::new(move || Box::pin(async move { copy }));
            let journaled = steps.run("message".into(), work).await;
            let message = journaled.and_then(|v| serde_json::from_value::<AgentMessage>(v).ok()).unwrap_or(message);
            push(&recorded, message);
            Ok(())
        })
    }
}

fn push(recorded: &Mutex<Vec<AgentMessage>>, message: AgentMessage) {
    match recorded.lock() {
        Ok(mut list) => list.push(message),
        Err(poisoned) => poisoned.into_inner().push(message),
    }
}
