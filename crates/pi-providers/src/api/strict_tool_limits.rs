//! Strict tools past Claude's limits (pi-ai's `strict-tool-limits.js`).
//!
//! Claude, on the Anthropic API and on Bedrock, rejects with a 400 a request whose strict tools
//! exceed its limits (about 20 strict tools, 16 optional or union-typed parameters across them,
//! or a grammar too large to compile). A tool that only *prefers* strict sampling
//! (`ConstrainedSampling::JsonSchema { strict: Strictness::Prefer }`) can do without it, so the
//! Anthropic and Bedrock adapters resend such a rejected request once with those tools
//! non-strict, record a `<api>_strict_tools_fallback` diagnostic on the message, and remember
//! the session: its later requests send those tools non-strict right away (the tool set rarely
//! changes between turns, and switching back would rewrite the tool definitions and miss the
//! prompt cache). Tools that *require* strict sampling are never relaxed; a request with only
//! those keeps its rejection.
//!
//! The memory is keyed by `StreamOptions::session_id` (nothing is remembered without one),
//! shared by both adapters, holds at most [`MAX_SESSIONS`] sessions (the least recently marked
//! is dropped first) and is freed by `cleanup_session_resources`.

use std::sync::{LazyLock, Mutex, PoisonError};

use pi_types::{AssistantMessageDiagnostic, ConstrainedSampling, Message, Strictness, Tool, TranscriptContext};
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::session_resources::SessionTable;
use crate::transport::http::{ApiError, Dialect, Retry};

/// The most sessions remembered; past it the least recently marked one is forgotten (it then
/// pays one more rejection).
pub const MAX_SESSIONS: usize = 10_000;

/// The texts Claude's rejections of over-limit strict tools contain.
const LIMIT_MESSAGES: [&str; 3] = [
    "The compiled grammar is too large",
    "Too many strict tools (",
    "Schemas contains too many parameters with union types (",
];

static SESSIONS: LazyLock<Mutex<SessionTable<()>>> = LazyLock::new(|| Mutex::new(SessionTable::new(MAX_SESSIONS)));

/// Whether a provider's error message says the request's strict tools exceed its limits.
pub fn is_strict_tool_limit_error_message(message: &str) -> bool {
    LIMIT_MESSAGES.iter().any(|limit| message.contains(limit))
}

/// Records that `session`'s strict tools exceeded Claude's limits (nothing without a session).
pub fn mark_strict_tool_limits_exceeded(session: Option<&str>) {
    let Some(session) = session else { return };
    let mut sessions = SESSIONS.lock().unwrap_or_else(PoisonError::into_inner);
    // A session already marked keeps its place: marking is not a use.
    if sessions.get(session).is_none() {
        sessions.insert(session, ());
    }
}

/// Whether an earlier request of `session` had its strict tools rejected for Claude's limits.
pub fn has_exceeded_strict_tool_limits(session: Option<&str>) -> bool {
    session.is_some_and(|s| SESSIONS.lock().unwrap_or_else(PoisonError::into_inner).get(s).is_some())
}

/// Forgets one session, or all of them (`cleanup_session_resources`).
pub(crate) fn forget(session: Option<&str>) {
    let mut sessions = SESSIONS.lock().unwrap_or_else(PoisonError::into_inner);
    match session {
        Some(session) => {
            sessions.remove(session);
        }
        None => sessions.clear(),
    }
}

/// Whether a tool prefers (but does not require) JSON-schema strict sampling.
pub(crate) fn prefers_strict(tool: &Tool) -> bool {
    matches!(tool.constrained_sampling, Some(ConstrainedSampling::JsonSchema { strict: Strictness::Prefer }))
}

/// The transcript with every tool that prefers strict sampling declared without it.
pub(crate) fn without_preferred_strict(context: &TranscriptContext) -> TranscriptContext {
    let relax =
        |tools: &Vec<Tool>| {
            tools
                .iter()
                .map(|tool| {
                    if prefers_strict(tool) {
                        Tool { constrained_sampling: None, ..tool.clone() }
                    } else {
                        tool.clone()
                    }
                })
                .collect()
        };
    let messages = context
        .messages()
        .iter()
        .map(|message| match message {
            Message::System(system) if system.tools_added.as_ref().is_some_and(|t| t.iter().any(prefers_strict)) => {
                let mut system = (**system).clone();
                system.tools_added = system.tools_added.as_ref().map(relax);
                Message::System(system.into())
            }
            other => other.clone(),
        })
        .collect();
    TranscriptContext::from_messages(messages)
}

/// The diagnostic of a resend without strict tools (`kind` names the API's family).
pub(crate) fn fallback_diagnostic(kind: &str, message: &str) -> AssistantMessageDiagnostic {
    let mut details = pi_types::JsonObject::new();
    details.insert("reason".into(), Value::String("strict_tool_limits_exceeded".into()));
    AssistantMessageDiagnostic {
        kind: kind.to_owned(),
        timestamp: pi_types::now_ms(),
        error: Some(pi_types::DiagnosticErrorInfo { message: message.to_owned(), ..Default::default() }),
        details: Some(details),
    }
}

/// A rejection as the Anthropic SDK reports it: status, `error.type` of the body, message.
#[derive(Clone, Debug)]
pub(crate) struct Rejection {
    pub status: u16,
    pub error_type: Option<String>,
    /// `error.details.error_code` of the body (message-thread rejections carry one).
    pub error_code: Option<String>,
    pub message: String,
}

impl Rejection {
    /// The Anthropic rule: a 400 `invalid_request_error` naming a strict tool limit.
    pub(crate) fn is_anthropic_strict_limit(&self) -> bool {
        self.status == 400
            && self.error_type.as_deref() == Some("invalid_request_error")
            && is_strict_tool_limit_error_message(&self.message)
    }
}

/// A dialect that remembers the last status error its inner dialect made.
pub(crate) struct Recording<D> {
    inner: D,
    last: Mutex<Option<Rejection>>,
}

impl<D: Dialect> Recording<D> {
    pub(crate) fn new(inner: D) -> Self {
        Self { inner, last: Mutex::new(None) }
    }

    /// The last status error, taken.
    pub(crate) fn take(&self) -> Option<Rejection> {
        self.last.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl<D: Dialect> Dialect for Recording<D> {
    fn status_error(&self, status: u16, headers: &HeaderMap, body: &[u8]) -> ApiError {
        let error = self.inner.status_error(status, headers, body);
        let parsed = crate::js_json::parse(&String::from_utf8_lossy(body)).ok();
        let error_body = parsed.as_ref().and_then(|v| v.get("error"));
        let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_owned);
        let error_type = text(error_body.and_then(|e| e.get("type")));
        let error_code = text(error_body.and_then(|e| e.get("details")).and_then(|d| d.get("error_code")));
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(Rejection { status, error_type, error_code, message: error.message.clone() });
        error
    }

    fn format(&self, error: &ApiError) -> String {
        self.inner.format(error)
    }

    fn exposes_headers(&self) -> bool {
        self.inner.exposes_headers()
    }

    fn retries_connection_errors(&self) -> bool {
        self.inner.retries_connection_errors()
    }

    fn retry(&self, error: &ApiError, retry_index: u32, max_retry_delay_ms: Option<u64>) -> Option<Retry> {
        self.inner.retry(error, retry_index, max_retry_delay_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_limit_texts_are_recognized_anywhere_in_a_message() {
        assert!(is_strict_tool_limit_error_message("400 {\"message\":\"Too many strict tools (21 > 20)\"}"));
        assert!(is_strict_tool_limit_error_message("The compiled grammar is too large, simplify"));
        assert!(is_strict_tool_limit_error_message("Schemas contains too many parameters with union types (17)"));
        assert!(!is_strict_tool_limit_error_message("Too many strict tools"));
        assert!(!is_strict_tool_limit_error_message("prompt is too long"));
    }

    #[test]
    fn sessions_are_remembered_until_cleaned_up_and_never_without_an_id() {
        mark_strict_tool_limits_exceeded(None);
        assert!(!has_exceeded_strict_tool_limits(None));
        mark_strict_tool_limits_exceeded(Some("strict-unit-a"));
        mark_strict_tool_limits_exceeded(Some("strict-unit-b"));
        assert!(has_exceeded_strict_tool_limits(Some("strict-unit-a")));
        crate::session_resources::cleanup_session_resources(Some("strict-unit-a")).ok();
        assert!(!has_exceeded_strict_tool_limits(Some("strict-unit-a")));
        assert!(has_exceeded_strict_tool_limits(Some("strict-unit-b")));
        forget(Some("strict-unit-b"));
    }

    #[test]
    fn only_preferring_tools_are_relaxed() {
        let tool = |name: &str, strict| Tool {
            name: name.into(),
            constrained_sampling: Some(ConstrainedSampling::JsonSchema { strict }),
            ..Default::default()
        };
        let context = pi_types::transcript::normalize_context(pi_types::Context {
            tools: Some(vec![tool("p", Strictness::Prefer), tool("r", Strictness::Require)]),
            ..Default::default()
        });
        let relaxed = pi_types::transcript::current_tools(without_preferred_strict(&context).messages());
        assert_eq!(relaxed[0].constrained_sampling, None);
        assert_eq!(
            relaxed[1].constrained_sampling,
            Some(ConstrainedSampling::JsonSchema { strict: Strictness::Require })
        );
    }
}
