//! Anthropic message threads: server-side continuation (pi-ai 1.6.1's `threadState`).
//!
//! # Protocol
//!
//! With the `message-threads-2026-08-12` beta, a request may carry `thread`:
//! `{"type": "create"}` asks the server to keep the conversation, and the reply's
//! `message_start` id names where it can be continued; the next request of the session then
//! sends `{"type": "continue", "previous_message_id": <that id>}` with only the messages after
//! the ones the server holds, and without `system` and `tools` (the server keeps the thread's
//! own). Each reply is continued at most once.
//!
//! Threads apply where the model's compat says `supportsMessageThreads` (by default: a base URL
//! on `api.anthropic.com`; gateways that drop unknown fields would silently lose the earlier
//! conversation), to requests with a session id and caching on, unless the request sets
//! `disable_continuation` (cache warming does). What the next request can continue is kept per
//! session ([`MAX_SESSIONS`] at most, the least recently written dropped first; freed by
//! `cleanup_session_resources`): the reply's id, how many messages the server holds, and a hash
//! of those messages with the settings a `continue` cannot change (endpoint, model, `system`,
//! `tools`, thinking, `output_config`, `tool_choice`, `betas`, `fallbacks`). A request whose prefix hashes
//! differently starts a new thread.
//!
//! A rejection of a thread request (never a started stream) is resent once in full: as a new
//! thread when the server cannot continue the old one (`thread_not_found`,
//! `thread_already_continued`, `thread_continue_in_flight`, `thread_fingerprint_mismatch`), or
//! without `thread` when the endpoint cannot use threads (`thread_unsupported_request`, or a 400
//! without a code whose message names `thread`), which once accepted turns threads off for the
//! session. Either resend records an `anthropic_thread_fallback` diagnostic.

use std::sync::{LazyLock, Mutex, PoisonError};

use pi_types::{AssistantMessageDiagnostic, Model};
use serde_json::{json, Map, Value};

use crate::api::strict_tool_limits::Rejection;
use crate::api::support::short_hash;
use crate::js_json;
use crate::session_resources::SessionTable;

/// The beta that enables threads.
pub(crate) const BETA: &str = "message-threads-2026-08-12";

/// The most sessions remembered; past it the least recently written one is forgotten (its next
/// request starts a new thread).
pub const MAX_SESSIONS: usize = 10_000;

/// Rejection codes of a `continue` that a new thread fixes: expired, raced, or a fixed setting
/// changed.
const NEW_THREAD_ERRORS: [&str; 4] =
    ["thread_not_found", "thread_already_continued", "thread_continue_in_flight", "thread_fingerprint_mismatch"];

/// What a session's next request can do.
enum Slot {
    /// The endpoint rejected threads: no `thread` is sent.
    Off,
    /// Continue after this reply.
    After(Reply),
}

#[derive(Clone)]
struct Reply {
    /// How many request messages the server holds.
    prefix_count: usize,
    /// [`prefix_hash`] of those messages.
    prefix_hash: String,
    /// The reply's message id.
    reply_id: String,
}

static SESSIONS: LazyLock<Mutex<SessionTable<Slot>>> = LazyLock::new(|| Mutex::new(SessionTable::new(MAX_SESSIONS)));

fn sessions() -> std::sync::MutexGuard<'static, SessionTable<Slot>> {
    SESSIONS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Forgets one session, or all of them (`cleanup_session_resources`).
pub(crate) fn forget(session: Option<&str>) {
    match session {
        Some(session) => {
            sessions().remove(session);
        }
        None => sessions().clear(),
    }
}

/// Threads go off for `session`: its endpoint rejected them.
pub(crate) fn turn_off(session: &str) {
    sessions().insert(session, Slot::Off);
}

/// The hash of what a `continue` builds on: the settings of `params` that must stay the same
/// within a thread, and `messages` with their cache markers left out and string contents as
/// the one text block they mean.
fn prefix_hash<'m>(
    model: &Model,
    params: &Map<String, Value>,
    messages: impl IntoIterator<Item = &'m Value>,
) -> String {
    let field = |name: &str| params.get(name).cloned().unwrap_or(Value::Null);
    let settings = Value::Array(vec![
        json!(model.provider),
        json!(model.base_url),
        field("model"),
        field("system"),
        field("tools"),
        field("thinking"),
        field("output_config"),
        field("tool_choice"),
        field("betas"),
        field("fallbacks"),
    ]);
    let conversation: Vec<Value> = messages.into_iter().map(meaning).collect();
    let mut text = js_json::stringify(&settings);
    text.push_str(&js_json::stringify(&Value::Array(conversation)));
    short_hash(&text)
}

/// A message as it hashes: no `cache_control` anywhere, a string `content` as one text block.
fn meaning(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| *key != "cache_control")
                .map(|(key, value)| match value {
                    Value::String(text) if key == "content" => (key.clone(), json!([{"type": "text", "text": text}])),
                    other => (key.clone(), meaning(other)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(meaning).collect()),
        other => other.clone(),
    }
}

fn messages_of(params: &Map<String, Value>) -> &[Value] {
    params.get("messages").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// `params` as a request creating a thread.
pub(crate) fn create(params: &Value) -> Value {
    let mut body = params.clone();
    if let Some(map) = body.as_object_mut() {
        map.insert("thread".into(), json!({"type": "create"}));
    }
    body
}

/// The thread request of `session` for the full request `params`: a `continue` when the
/// session's last reply is where `params` goes on from (that reply is then used up), else a new
/// thread; `None` when threads are off for the session.
pub(crate) fn prepare(model: &Model, session: &str, params: &Value) -> Option<Value> {
    let map = params.as_object()?;
    // The slot is copied out and hashed with the table unlocked: other sessions' requests do not
    // wait for this transcript's hash.
    let reply = match sessions().get(session) {
        Some(Slot::Off) => return None,
        Some(Slot::After(reply)) => Some(reply.clone()),
        None => None,
    };
    let messages = messages_of(map);
    let continues = reply.filter(|reply| {
        messages.len() > reply.prefix_count
            && prefix_hash(model, map, &messages[..reply.prefix_count]) == reply.prefix_hash
    });
    let Some(reply) = continues else { return Some(create(params)) };
    // Each reply is continued once: it is taken from the table, and a request that finds it
    // taken meanwhile (a concurrent one of the session) starts a new thread.
    {
        let mut table = sessions();
        match table.get(session) {
            Some(Slot::After(now)) if now.reply_id == reply.reply_id => {
                table.remove(session);
            }
            Some(Slot::Off) => return None,
            _ => return Some(create(params)),
        }
    }
    let mut body: Map<String, Value> = map
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "system" | "tools" | "messages"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    body.insert("messages".into(), Value::Array(messages[reply.prefix_count..].to_vec()));
    body.insert("thread".into(), json!({"type": "continue", "previous_message_id": reply.reply_id}));
    Some(Value::Object(body))
}

/// How a rejected thread request is resent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fallback {
    /// In full, as a new thread.
    NewThread,
    /// In full, without `thread`; once accepted, threads go off for the session.
    WithoutThread,
}

/// How `rejection` of a thread request is resent, if it is about the thread (any other error,
/// a prompt too long or a strict tool limit, would only fail again), with its diagnostic.
pub(crate) fn fallback(rejection: &Rejection) -> Option<(Fallback, AssistantMessageDiagnostic)> {
    let code = rejection.error_code.as_deref();
    let fallback = if code.is_some_and(|code| NEW_THREAD_ERRORS.contains(&code)) {
        Fallback::NewThread
    } else if code == Some("thread_unsupported_request")
        || (code.is_none() && rejection.status == 400 && rejection.message.contains("thread"))
    {
        // The endpoint cannot thread this request, or does not know the `thread` field
        // ("thread: Extra inputs are not permitted").
        Fallback::WithoutThread
    } else {
        return None;
    };
    let mut details = pi_types::JsonObject::new();
    details.insert("reason".into(), json!(code.map_or_else(|| rejection.status.to_string(), str::to_owned)));
    let diagnostic = AssistantMessageDiagnostic {
        kind: "anthropic_thread_fallback".to_owned(),
        timestamp: pi_types::now_ms(),
        error: Some(pi_types::DiagnosticErrorInfo { message: rejection.message.clone(), ..Default::default() }),
        details: Some(details),
    };
    Some((fallback, diagnostic))
}

/// Records where `session`'s next request can continue: after the reply `reply_id`, whose
/// request was the full `params` and which converts to the assistant messages `reply`.
pub(crate) fn record(model: &Model, session: &str, params: &Value, reply_id: &str, reply: Vec<Value>) {
    let Some(map) = params.as_object() else { return };
    let messages = messages_of(map);
    let slot = Slot::After(Reply {
        prefix_count: messages.len().saturating_add(reply.len()),
        prefix_hash: prefix_hash(model, map, messages.iter().chain(&reply)),
        reply_id: reply_id.to_owned(),
    });
    sessions().insert(session, slot);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_markers_and_string_contents_hash_as_what_they_mean() {
        let model =
            Model { provider: "anthropic".into(), base_url: "https://api.anthropic.com".into(), ..Default::default() };
        let params = json!({"model": "m", "system": [{"type": "text", "text": "s"}]});
        let params = params.as_object().unwrap_or_else(|| unreachable!());
        let plain = [json!({"role": "user", "content": "hi"})];
        let marked = [
            json!({"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}),
        ];
        assert_eq!(prefix_hash(&model, params, &plain), prefix_hash(&model, params, &marked));
        let other = [json!({"role": "user", "content": "ho"})];
        assert_ne!(prefix_hash(&model, params, &plain), prefix_hash(&model, params, &other));
        let mut changed = params.clone();
        changed.insert("system".into(), json!("t"));
        assert_ne!(prefix_hash(&model, params, &plain), prefix_hash(&model, &changed, &plain));
    }

    #[test]
    fn a_reply_is_continued_once_and_an_off_session_sends_no_thread() {
        let model = Model::default();
        let first =
            json!({"model": "m", "system": "s", "messages": [{"role": "user", "content": "a"}], "stream": true});
        assert_eq!(prepare(&model, "threads-unit", &first), Some(create(&first)));
        record(
            &model,
            "threads-unit",
            &first,
            "msg_1",
            vec![json!({"role": "assistant", "content": [{"type": "text", "text": "b"}]})],
        );
        let next = json!({"model": "m", "system": "s", "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [{"type": "text", "text": "b"}]},
            {"role": "user", "content": "c"},
        ], "stream": true});
        assert_eq!(
            prepare(&model, "threads-unit", &next),
            Some(json!({"model": "m", "messages": [{"role": "user", "content": "c"}], "stream": true,
                "thread": {"type": "continue", "previous_message_id": "msg_1"}}))
        );
        assert_eq!(prepare(&model, "threads-unit", &next), Some(create(&next)));
        turn_off("threads-unit");
        assert_eq!(prepare(&model, "threads-unit", &next), None);
        crate::session_resources::cleanup_session_resources(Some("threads-unit")).ok();
        assert_eq!(prepare(&model, "threads-unit", &next), Some(create(&next)));
    }
}
