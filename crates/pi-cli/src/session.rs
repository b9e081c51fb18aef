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
use pi_types::AgentMessage;

use crate::error::CliError;
use crate::setup::Backend;

/// Open (or create) the session file, printing what loading repaired.
pub fn open(path: &Path) -> Result<(Session, SavedSession), CliError> {
    let (session, saved) = Session::open(path).map_err(|e| CliError::Setup(e.to_string()))?;
    for warning in &saved.warnings {
        eprintln!("pi: {warning}");
    }
    Ok((session, saved))
}

/// Say what a resume took over: how many messages, and a last prompt without an answer.
fn report_resume(path: &Path, messages: &[AgentMessage]) {
    let count = messages.iter().filter(|m| !matches!(m, AgentMessage::System(_))).count();
    if count > 0 {
        eprintln!("pi: resumed {count} message{} from {}", if count == 1 { "" } else { "s" }, path.display());
    }
    if is_unanswered(messages.last()) {
        eprintln!(
            "pi: the last prompt in {} has no answer (the run ended while answering); /continue in `pi chat --session \
             {}` answers it",
            path.display(),
            path.display()
        );
    }
}

/// Whether the transcript ends waiting for the model: a prompt or tool results with no answer
/// after them (what a process killed mid-answer leaves).
pub fn is_unanswered(last: Option<&AgentMessage>) -> bool {
    matches!(last, Some(AgentMessage::User(_) | AgentMessage::ToolResult(_)))
}

/// Keep a copy of the session file before `/reset` rewrites it: `FILE.bak`, or the first free
/// `FILE.bak.N`. Returns where it went.
pub fn keep_copy(path: &Path) -> Result<std::path::PathBuf, CliError> {
    let name = |suffix: String| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        std::path::PathBuf::from(name)
    };
    let copy = (1u32..)
        .map(|n| name(if n == 1 { ".bak".to_owned() } else { format!(".bak.{n}") }))
        .find(|candidate| !candidate.exists())
        .ok_or_else(|| CliError::Io("no free name for a copy of the session".into()))?;
    std::fs::copy(path, &copy)
        .map_err(|e| CliError::Io(format!("cannot copy {} to {}: {e}", path.display(), copy.display())))?;
    Ok(copy)
}

/// The agent continuing `saved` with `options`, recorded in `session` from now on.
pub fn resume(session: &Session, saved: SavedSession, options: AgentOptions) -> Result<Agent, CliError> {
    let messages = saved.messages.clone();
    let agent = saved.resume(options).map_err(|error| match error {
        AgentError::SystemPromptChanged { .. } => CliError::Usage(format!(
            "{}: --system differs from the session's system prompt; leave it out to resume, or use another file",
            session.path().display()
        )),
        other => CliError::Setup(other.to_string()),
    })?;
    report_resume(session.path(), &messages);
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
/// connections), each announced on stderr in the words of the final error. A refused
/// connection is not retried: nothing listens at the URL (a wrong URL or a server that is
/// down), so waiting 2 + 4 + 8 s would only delay the same answer.
pub fn retry_policy(retries: u32, backend: &Backend) -> RetryPolicy {
    let backend = backend.clone();
    RetryPolicy::new(|message| {
        let retryable = pi_providers::is_retryable_error(message) && !is_refused(message);
        tracing::debug!(target: "pi_cli::retry", retryable, error = message.error_message.as_deref(), "retry decision");
        retryable
    })
    .max_retries(retries)
    .on_retry(move |event| {
        if let RetryEvent::Scheduled { attempt, max_attempts, delay, error_message } = event {
            let error = backend.describe_failure(&backend.model, error_message);
            let error = error.split_whitespace().collect::<Vec<_>>().join(" ");
            eprintln!("pi: {error}; retrying in {} (attempt {attempt} of {max_attempts})", seconds(*delay));
        }
    })
}

/// Whether a response failed because the server refused the connection (the OS's words, as
/// reqwest and the proxy client pass them on).
fn is_refused(message: &pi_types::AssistantMessage) -> bool {
    message.error_message.as_deref().is_some_and(|text| text.contains("Connection refused"))
}

fn seconds(delay: Duration) -> String {
    format!("{:.0} s", delay.as_secs_f64().max(1.0))
}
