//! Durable pi agent runs on [Restate](https://restate.dev): a run survives the worker that
//! runs it.
//!
//! A worker serves two Restate virtual objects keyed by the session id:
//! - `PiSession`: `run` (exclusive: one run per session at a time) runs the agent loop on the
//!   session's transcript; `messages` (shared) reads the transcript.
//! - `PiSessionInbox`: `steer` and `follow_up` queue messages for the running agent.
//!
//! Every model response and every tool execution is a journaled step (`ctx.run`). When a
//! worker dies mid-run, Restate invokes the run again (on any worker behind the deployment's
//! address); the loop is replayed from the journal: a step whose value the journal holds is
//! not performed again, its recorded value is returned. So a tool that completed never runs
//! twice, and the transcript equals that of a run that was never interrupted: the messages the
//! loop makes itself (tool results and their timestamps and durations) are journaled as they
//! end, and the transcript is made of the recorded copies. Only the step in progress when the
//! worker died runs again: tool execution is at-least-once for that one step, exactly-once
//! for every completed one (see docs/scale-out.md).
//!
//! Steering and follow-up messages go to the session's inbox; the run drains it with a
//! journaled call at each of the loop's polls. Abort is a cancellation of the run's
//! invocation ([`Client::abort`]): the run ends at its next step and adds nothing.
//!
//! **Events across a resume.** Listeners ([`DurableAgent::subscribe`]) run in the worker. A
//! worker that resumes a run replays it from the start, so its listeners see every event of
//! the run again: the replayed steps' events come at once from the journal (a replayed
//! response is its `message_start` and `message_end`, without deltas; a replayed tool call
//! its start and end with the journaled result), then the live steps' events as they happen.
//! Events are therefore at-least-once across a resume; a listener that forwards them keys
//! them by session, run and message index to drop repeats.
//!
//! The loop's hooks run again on a replay: they must decide from what they are given.
//!
//! ```no_run
//! use std::sync::Arc;
//! use pi_durable::{Client, DurableAgent};
//! use pi_loop::LoopConfig;
//! use pi_types::{Model, UserMessage};
//! # async fn example(model: Model, stream_fn: Arc<dyn pi_types::StreamFn>) -> Result<(), Box<dyn std::error::Error>> {
//! // The worker: serve the agent; register its address with the Restate server once.
//! let agent = DurableAgent::new(LoopConfig::new(model, stream_fn), Vec::new())
//!     .subscribe(|session, event| println!("{session}: {}", event.type_name()));
//! let listener = tokio::net::TcpListener::bind("0.0.0.0:9080").await?;
//! tokio::spawn(pi_durable::serve(agent, listener, std::future::pending::<()>()));
//! let client = Client::new("http://127.0.0.1:8080", "http://127.0.0.1:9070")?;
//! client.register("http://127.0.0.1:9080").await?;
//! // Any process: run a session's agent, steer it, read its transcript.
//! let added = client.run("session-1", vec![UserMessage::text("Hi").into()]).await?;
//! let transcript = client.messages("session-1").await?;
//! # let _ = (added, transcript);
//! # Ok(())
//! # }
//! ```

mod client;
mod service;
mod steps;

pub use client::{Client, RunHandle};
pub use service::{endpoint, serve, DurableAgent, Inbox, RunRequest};
pub use steps::Subscriber;

/// What the [`Client`] reports.
#[derive(Debug, thiserror::Error)]
pub enum DurableError {
    /// No answer: connection refused, timed out, reset.
    #[error("Restate request failed: {0}")]
    Http(String),
    /// The server answered with a non-2xx status.
    #[error("Restate answered {status}: {body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The start of the answer's body.
        body: String,
    },
    /// The answer was not the expected JSON.
    #[error("Unreadable Restate answer: {0}")]
    Decode(String),
}
