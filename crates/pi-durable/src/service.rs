//! The Restate services: `PiSession` runs an agent, `PiSessionInbox` holds what is typed to it
//! meanwhile. Both are virtual objects keyed by the session id.
//!
//! `PiSession/{id}/run` is exclusive: one run per session at a time, later runs queue behind it
//! in Restate. Its state `messages` is the session's transcript, written when a run ends.
//! `PiSessionInbox/{id}/steer` and `follow_up` append to the inbox's queues; the run drains them
//! with a call at each of the loop's polls, so the messages a run takes are in its journal.

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use pi_loop::{AgentContext, CancellationToken, LoopConfig};
use pi_types::{AgentMessage, AgentTool};
use restate_sdk::prelude::*;

use crate::steps::{DurableStreamFn, DurableTool, Queue, RecordingSink, Step, Steps, Subscriber};

/// The state key of a session's transcript.
const MESSAGES: &str = "messages";
/// The state keys of the inbox's queues.
const STEERING: &str = "steering";
const FOLLOW_UP: &str = "followUp";
/// Restate's code of a cancelled invocation.
const CANCELLED: u16 = 409;

/// The agent a worker runs for every session: the loop's configuration, its tools, and the
/// listeners of its events. Bind it to a Restate endpoint with [`crate::endpoint`].
#[derive(Clone)]
pub struct DurableAgent {
    config: LoopConfig,
    tools: Vec<Arc<dyn AgentTool>>,
    subscribers: Vec<Subscriber>,
}

impl std::fmt::Debug for DurableAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(|t| t.spec().name()).collect();
        f.debug_struct("DurableAgent")
            .field("config", &self.config)
            .field("tools", &tools)
            .field("subscribers", &self.subscribers.len())
            .finish()
    }
}

impl DurableAgent {
    /// An agent of this configuration and these tools. The configuration's stream function
    /// and tools are wrapped so that each response and each execution is a journaled step;
    /// its steering and follow-up sources are replaced by the session's inbox. Its hooks run
    /// again on a replay, so they must decide from what they are given (side effects belong in
    /// tools).
    pub fn new(config: LoopConfig, tools: Vec<Arc<dyn AgentTool>>) -> Self {
        Self { config, tools, subscribers: Vec::new() }
    }

    /// Call `listener` with every event of every run on this worker (see the crate docs for
    /// what a listener sees when a run resumes here).
    pub fn subscribe(mut self, listener: impl Fn(&str, &pi_types::AgentEvent) + Send + Sync + 'static) -> Self {
        self.subscribers.push(Arc::new(listener));
        self
    }

    /// Run the loop, performing each step it sends in the journal, until it returns.
    async fn drive(
        &self,
        ctx: &ObjectContext<'_>,
        prompts: Vec<AgentMessage>,
        prior: Vec<AgentMessage>,
    ) -> Result<Vec<AgentMessage>, HandlerError> {
        let session: Arc<str> = ctx.key().into();
        let (steps, mut requests) = Steps::channel();
        let stream_fn = Arc::new(DurableStreamFn { inner: Arc::clone(&self.config.stream_fn), steps: steps.clone() });
        let tools = self
            .tools
            .iter()
            .map(|tool| Arc::new(DurableTool { inner: Arc::clone(tool), steps: steps.clone() }) as Arc<dyn AgentTool>)
            .collect();
        let (steering, follow_up) = (steps.clone(), steps.clone());
        let mut config = self.config.clone();
        config.stream_fn = stream_fn;
        let config = config
            .get_steering_messages(move || {
                let steps = steering.clone();
                async move { steps.drain(Queue::Steering).await }
            })
            .get_follow_up_messages(move || {
                let steps = follow_up.clone();
                async move { steps.drain(Queue::FollowUp).await }
            });
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::new(RecordingSink {
            session: Arc::clone(&session),
            subscribers: self.subscribers.clone().into(),
            steps,
            recorded: Arc::clone(&recorded),
        });
        let cancel = CancellationToken::new();
        let context = AgentContext { messages: prior.into(), tools };
        let mut run = pin!(pi_loop::run_agent_loop(prompts, context, config, sink, cancel.clone()));
        let mut cancelled = false;
        loop {
            let next = std::future::poll_fn(|cx| {
                if let Poll::Ready(outcome) = run.as_mut().poll(cx) {
                    return Poll::Ready(Err(outcome));
                }
                match requests.poll_recv(cx) {
                    Poll::Ready(Some(step)) => Poll::Ready(Ok(step)),
                    _ => Poll::Pending,
                }
            })
            .await;
            match next {
                Ok(step) => perform(ctx, &session, step, &mut cancelled, &cancel).await?,
                Err(outcome) => {
                    outcome.map_err(|e| TerminalError::new(e.to_string()))?;
                    break;
                }
            }
        }
        let recorded = match Arc::try_unwrap(recorded) {
            Ok(list) => list.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner()),
            Err(shared) => shared.lock().map(|l| l.clone()).unwrap_or_default(),
        };
        if cancelled {
            return Err(TerminalError::new_with_code(CANCELLED, "cancelled").into());
        }
        Ok(recorded)
    }
}

/// Perform one step in the journal and answer the loop. A cancellation seen while waiting
/// cancels the loop's token; the loop then ends its run, and the steps it still sends are
/// answered without the journal (nothing is written for a cancelled run).
async fn perform(
    ctx: &ObjectContext<'_>,
    session: &str,
    step: Step,
    cancelled: &mut bool,
    cancel: &CancellationToken,
) -> Result<(), HandlerError> {
    match step {
        Step::Run { name, work, reply } => {
            if *cancelled {
                return Ok(());
            }
            match ctx.run(move || async move { Ok(Json(work().await)) }).name(name).await {
                Ok(Json(value)) => {
                    let _ = reply.send(value);
                }
                Err(error) if error.code() == CANCELLED => {
                    *cancelled = true;
                    cancel.cancel();
                }
                Err(error) => return Err(error.into()),
            }
        }
        Step::Drain { queue, reply } => {
            if *cancelled {
                let _ = reply.send(Vec::new());
                return Ok(());
            }
            let inbox = ctx.object_client::<InboxClient>(session.to_owned());
            let drained = match queue {
                Queue::Steering => inbox.drain_steering().call().await,
                Queue::FollowUp => inbox.drain_follow_up().call().await,
            };
            match drained {
                Ok(Json(messages)) => {
                    let _ = reply.send(messages);
                }
                Err(error) if error.code() == CANCELLED => {
                    *cancelled = true;
                    cancel.cancel();
                    let _ = reply.send(Vec::new());
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
    Ok(())
}

/// What `PiSession/{id}/run` takes: the messages that start the run.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct RunRequest {
    /// Prompt messages, appended to the session's transcript.
    pub prompts: Vec<AgentMessage>,
}

#[restate_sdk::object(name = "PiSession")]
impl DurableAgent {
    /// Run the agent on the session's transcript with these prompts; the messages the run
    /// added, once the transcript holds them.
    #[handler]
    async fn run(&self, ctx: ObjectContext<'_>, request: Json<RunRequest>) -> HandlerResult<Json<Vec<AgentMessage>>> {
        let prior = ctx.get::<Json<Vec<AgentMessage>>>(MESSAGES).await?.map(Json::into_inner).unwrap_or_default();
        let added = self.drive(&ctx, request.into_inner().prompts, prior.clone()).await?;
        let mut transcript = prior;
        transcript.extend(added.iter().cloned());
        ctx.set(MESSAGES, Json(transcript));
        Ok(Json(added))
    }

    /// The session's transcript as of its last finished run.
    #[handler]
    async fn messages(&self, ctx: SharedObjectContext<'_>) -> HandlerResult<Json<Vec<AgentMessage>>> {
        Ok(ctx.get::<Json<Vec<AgentMessage>>>(MESSAGES).await?.unwrap_or(Json(Vec::new())))
    }
}

/// The messages typed to a session while it runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Inbox;

#[restate_sdk::object(name = "PiSessionInbox")]
impl Inbox {
    /// Queue messages for the running agent's next turn.
    #[handler]
    async fn steer(&self, ctx: ObjectContext<'_>, messages: Json<Vec<AgentMessage>>) -> HandlerResult<()> {
        append(&ctx, STEERING, messages.into_inner()).await
    }

    /// Queue messages for when the running agent would stop.
    #[handler]
    async fn follow_up(&self, ctx: ObjectContext<'_>, messages: Json<Vec<AgentMessage>>) -> HandlerResult<()> {
        append(&ctx, FOLLOW_UP, messages.into_inner()).await
    }

    /// Take the steering queue.
    #[handler]
    async fn drain_steering(&self, ctx: ObjectContext<'_>) -> HandlerResult<Json<Vec<AgentMessage>>> {
        take(&ctx, STEERING).await
    }

    /// Take the follow-up queue.
    #[handler]
    async fn drain_follow_up(&self, ctx: ObjectContext<'_>) -> HandlerResult<Json<Vec<AgentMessage>>> {
        take(&ctx, FOLLOW_UP).await
    }
}

async fn append(ctx: &ObjectContext<'_>, key: &'static str, messages: Vec<AgentMessage>) -> HandlerResult<()> {
    let mut queue = ctx.get::<Json<Vec<AgentMessage>>>(key).await?.map(Json::into_inner).unwrap_or_default();
    queue.extend(messages);
    ctx.set(key, Json(queue));
    Ok(())
}

async fn take(ctx: &ObjectContext<'_>, key: &'static str) -> HandlerResult<Json<Vec<AgentMessage>>> {
    let queue = ctx.get::<Json<Vec<AgentMessage>>>(key).await?.map(Json::into_inner).unwrap_or_default();
    if !queue.is_empty() {
        ctx.clear(key);
    }
    Ok(Json(queue))
}

/// The endpoint a Restate server invokes: both services of `agent`.
pub fn endpoint(agent: DurableAgent) -> Endpoint {
    Endpoint::builder().bind(agent).bind(Inbox).build()
}

/// Serve `agent` on `listener` until `shutdown` resolves (register the address with the
/// Restate server as a deployment: see [`crate::Client::register`]).
pub async fn serve(agent: DurableAgent, listener: tokio::net::TcpListener, shutdown: impl Future) {
    HttpServer::new(endpoint(agent)).serve_with_cancel(listener, shutdown).await;
}
