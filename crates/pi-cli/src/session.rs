//! `--session URL`, `pi sessions` and the retry policy of every CLI agent.
//!
//! A session keeps the conversation (`pi_agent::Session`, appended as messages end), so
//! `pi --session URL "..."` and `pi chat --session URL` pick up where the last run stopped,
//! also after a crash. URL is a file (one JSON message per line), `sqlite:PATH#ID` or
//! `postgres://...#ID` (`pi_store::open`). A saved conversation keeps its system prompt;
//! `--system` with another one is refused rather than ignored.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pi_agent::{Agent, AgentError, AgentOptions, RetryEvent, RetryPolicy, SavedSession, Session, SessionSummary};
use pi_types::AgentMessage;

use crate::error::CliError;
use crate::setup::Backend;

/// Open (or create) the session `url` names, printing what loading repaired.
pub fn open(url: &str) -> Result<(Session, SavedSession), CliError> {
    // The agent is built synchronously (also by `pi chat`); the store's I/O runs on the
    // CLI's multi-threaded runtime meanwhile.
    let (session, saved) = blocking(async {
        let (store, id) = pi_store::open(url).await.map_err(|e| CliError::Setup(e.to_string()))?;
        Session::load(store, id).await.map_err(|e| CliError::Setup(e.to_string()))
    })?;
    for warning in &saved.warnings {
        eprintln!("pi: {warning}");
    }
    Ok((session, saved))
}

/// Say what a resume took over: how many messages, and a last prompt without an answer.
fn report_resume(url: &str, messages: &[AgentMessage]) {
    let place = pi_store::without_password(url);
    let count = messages.iter().filter(|m| !matches!(m, AgentMessage::System(_))).count();
    if count > 0 {
        eprintln!("pi: resumed {count} message{} from {place}", if count == 1 { "" } else { "s" });
    }
    if is_unanswered(messages.last()) {
        eprintln!(
            "pi: the last prompt in {place} has no answer (the run ended while answering); /continue in `pi chat \
             --session {place}` answers it"
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
pub fn keep_copy(path: &std::path::Path) -> Result<std::path::PathBuf, CliError> {
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

/// `pi sessions [STORE]`: the sessions of a store (a directory's `*.jsonl` files by default),
/// one line each: id, last update (UTC), messages, cost.
pub async fn list(store: &str) -> Result<String, CliError> {
    let location = pi_store::Location::parse(store);
    let store = location.connect().await.map_err(|e| CliError::Setup(e.to_string()))?;
    let sessions = store.list().await.map_err(|e| CliError::Setup(e.to_string()))?;
    Ok(listing(&sessions))
}

fn listing(sessions: &[SessionSummary]) -> String {
    let width = sessions.iter().map(|s| s.id.len()).max().unwrap_or(0).max(2);
    let mut text = format!("{:<width$}  {:<20}  {:>8}  {:>10}\n", "ID", "UPDATED", "MESSAGES", "COST");
    for session in sessions {
        text.push_str(&format!(
            "{:<width$}  {:<20}  {:>8}  {:>10}\n",
            session.id,
            utc(session.updated_ms / 1000),
            session.messages,
            format!("${:.4}", session.cost)
        ));
    }
    text
}

/// `YYYY-MM-DDTHH:MM:SSZ` of a Unix time (the civil calendar from days since 1970-01-01).
fn utc(seconds: u64) -> String {
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest / 60 % 60, rest % 60)
}

/// Run a store's future to its end from synchronous code on the CLI's runtime.
fn blocking<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}

/// The agent continuing `saved` with `options`, recorded in `session` (at `url`) from now on.
pub fn resume(session: &Session, url: &str, saved: SavedSession, options: AgentOptions) -> Result<Agent, CliError> {
    let messages = saved.messages.clone();
    let agent = saved.resume(options).map_err(|error| match error {
        AgentError::SystemPromptChanged { .. } => CliError::Usage(format!(
            "{}: --system differs from the session's system prompt; leave it out to resume, or use another file",
            pi_store::without_password(url)
        )),
        other => CliError::Setup(other.to_string()),
    })?;
    report_resume(url, &messages);
    // The recording lasts as long as the agent (see `pi_agent::Subscription`).
    let _recording = blocking(session.attach(&agent)).map_err(|e| CliError::Setup(e.to_string()))?;
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
/// connection is not retried (`pi_providers::is_retryable_error`): it fails at once.
pub fn retry_policy(retries: u32, backend: &Backend) -> RetryPolicy {
    let backend = backend.clone();
    RetryPolicy::new(|message| {
        let retryable = pi_providers::is_retryable_error(message);
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

fn seconds(delay: Duration) -> String {
    format!("{:.0} s", delay.as_secs_f64().max(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_has_one_line_per_session() {
        let sessions =
            [SessionSummary { id: "support-42".into(), updated_ms: 1_796_541_897_984, messages: 12, cost: 0.5 }];
        assert_eq!(
            listing(&sessions),
            "ID          UPDATED               MESSAGES        COST\n\
             support-42  2026-12-06T07:24:57Z        12     $0.5000\n"
        );
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
    }
}
