//! `--session FILE` and the retry policy of every CLI agent.
//!
//! A session file keeps the conversation (`pi_agent::Session`: one JSON message per line,
//! appended as messages end), so `pi --session FILE "..."` and `pi chat --session FILE` pick
//! up where the last run stopped, also after a crash. A saved conversation keeps its system
//! prompt; `--system` with another one is refused rather than ignored.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pi_agent::{Agent, AgentError, AgentOptions, RetryEvent, RetryPolicy, SavedSession, Session};

use crate::error::CliError;

/// Open (or create) the session file, printing what loading repaired.
pub fn open(path: &Path) -> Result<(Session, SavedSession), CliError> {
    let (session, saved) = Session::open(path).map_err(|e| CliError::Setup(e.to_string()))?;
    for warning in &saved.warnings {
        eprintln!("pi: {warning}");
    }
    Ok((session, saved))
}

/// The agent continuing `saved` with `options`, recorded in `session` from now on.
pub fn resume(session: &Session, saved: SavedSession, options: AgentOptions) -> Result<Agent, CliError> {
    let agent = saved.resume(options).map_err(|error| match error {
        AgentError::SystemPromptChanged { .. } => CliError::Usage(format!(
            "{}: --system differs from the session's system prompt; leave it out to resume, or use another file",
            session.path().display()
        )),
        other => CliError::Setup(other.to_string()),
    })?;
    // The recording lasts as long as the agent (see `pi_agent::Subscription`).
    let _recording = session.attach(&agent);
    let reported = AtomicBool::new(false);
    let session = session.clone();
    agent.subscribe_fn(move |event| {
        if matches!(event, pi_types::AgentEvent::AgentEnd { .. }) {
            if let Some(error) = session.error().filter(|_| !reported.swap(true, Ordering::Relaxed)) {
                eprintln!("pi: {error}; the conversation is no longer recorded");
            }
        }
    });
    Ok(agent)
}

/// Up to `retries` retries of transient provider errors (rate limits, overload, 5xx, dropped
/// connections), announced on stderr.
pub fn retry_policy(retries: u32) -> RetryPolicy {
    RetryPolicy::new(pi_providers::is_retryable_error).max_retries(retries).on_retry(|event| {
        if let RetryEvent::Scheduled { attempt, max_attempts, delay, error_message } = event {
            let error = error_message.split_whitespace().collect::<Vec<_>>().join(" ");
            eprintln!("pi: {error}; retrying in {} (attempt {attempt} of {max_attempts})", seconds(*delay));
        }
    })
}

fn seconds(delay: Duration) -> String {
    format!("{:.0} s", delay.as_secs_f64().max(1.0))
}
