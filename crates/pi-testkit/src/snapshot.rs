//! A compact, stable view of an agent's events for snapshot tests, in one call.
//!
//! [`events_snapshot`] checks the events against the run grammar ([`crate::grammar`]) and
//! returns them as a JSON array to hand to `insta::assert_yaml_snapshot!` (or
//! `assert_json_snapshot!`, or `assert_eq!`):
//!
//! * **Each event once.** A `message_update` shows its assistant-message event without the
//!   partial message (on the wire every update carries it twice, as `message` and as
//!   `assistantMessageEvent.partial`); the message is shown only where it differs from the
//!   partial. A `message_end` whose message is the one its `message_start` showed (user and
//!   tool-result messages) says `"[as started above]"`. `turn_end` and `agent_end` show the
//!   messages they repeat as a reference
//!   (`"[as ended above]"`, `"[2 messages ended above]"`) when they equal what the
//!   `message_end` events already showed, and in full when they do not.
//! * **Redacted.** `timestamp` becomes `"[timestamp]"` and `usage` `"[usage]"`, at any depth;
//!   `durationMs` is left out (a measured time, and whether a message has one depends on when
//!   its provider stamped it). Ids (`toolCallId`, a tool call's `id`, `responseId`) become
//!   `"[id 1]"`, `"[id 2]"`, ... in order of first appearance, so a tool call still matches
//!   its execution and result.
//!
//! Keeping the events of a run to snapshot them later makes the provider copy its growing
//! message once per delta (it cannot mutate one that a listener still holds); an
//! [`EventRecorder`] instead reduces each event to its compact view as it arrives and keeps
//! no partial message.
//!
//! ```
//! use std::sync::Arc;
//! use pi_agent::{Agent, AgentOptions};
//! use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider, FauxResponse};
//! use pi_testkit::snapshot::EventRecorder;
//! use pi_types::StopReason;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let faux = FauxProvider::default();
//! faux.set_responses([FauxResponse::Message(faux_assistant_message(vec![faux_text("Hi!")], StopReason::Stop))]);
//! let agent = Agent::new(AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()));
//! let recorder = EventRecorder::attach(&agent);
//! agent.prompt("Hello").await.unwrap();
//! insta::assert_yaml_snapshot!(recorder.snapshot(), @r###"
//! - type: agent_start
//! - type: turn_start
//! - type: message_start
//!   message:
//!     role: user
//!     content:
//!       - type: text
//!         text: Hello
//!     timestamp: "[timestamp]"
//! - type: message_end
//!   message: "[as started above]"
//! - type: message_start
//!   message:
//!     role: assistant
//!     content: []
//!     api: faux
//!     provider: faux
//!     model: faux-1
//!     usage: "[usage]"
//!     stopReason: pending
//!     timestamp: "[timestamp]"
//! - type: message_update
//!   event: text_start
//!   contentIndex: 0
//! - type: message_update
//!   event: text_delta
//!   contentIndex: 0
//!   delta: Hi!
//! - type: message_update
//!   event: text_end
//!   contentIndex: 0
//!   content: Hi!
//! - type: message_end
//!   message:
//!     role: assistant
//!     content:
//!       - type: text
//!         text: Hi!
//!     api: faux
//!     provider: faux
//!     model: faux-1
//!     thinkingLevel: "off"
//!     usage: "[usage]"
//!     stopReason: stop
//!     timestamp: "[timestamp]"
//! - type: turn_end
//!   message: "[as ended above]"
//!   toolResults: []
//! - type: agent_end
//!   messages: "[2 messages ended above]"
//! "###);
//! # });
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use pi_agent::{Agent, Subscription};
use pi_types::{AgentEvent, AgentMessage, AssistantContent, AssistantMessageEvent, ToolResultMessage};
use serde_json::{json, Map, Value};

use crate::grammar::{GrammarError, RunsChecker};

/// The compact, redacted view of `events`, after checking them against the run grammar.
///
/// # Panics
/// When the events break the grammar (the message names the event); see
/// [`try_events_snapshot`] for the error as a value.
pub fn events_snapshot(events: &[AgentEvent]) -> Value {
    match try_events_snapshot(events) {
        Ok(view) => view,
        Err(error) => panic!("the events break the run grammar: {error}"),
    }
}

/// [`events_snapshot`] with a grammar violation as an error.
pub fn try_events_snapshot(events: &[AgentEvent]) -> Result<Value, GrammarError> {
    let mut view = CompactView::default();
    for event in events {
        view.push(event)?;
    }
    view.finish()
}

/// Records an agent's events in their compact view while it runs (see the module docs).
///
/// Cloning shares the record. The listener stays subscribed until [`EventRecorder::detach`]
/// or until the agent is dropped.
#[derive(Clone)]
pub struct EventRecorder {
    view: Arc<Mutex<CompactView>>,
    subscription: Arc<Mutex<Option<Subscription>>>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder").field("events", &lock(&self.view).events.len()).finish()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl EventRecorder {
    /// Subscribe a recorder to `agent`.
    pub fn attach(agent: &Agent) -> Self {
        let view: Arc<Mutex<CompactView>> = Arc::default();
        let sink = Arc::clone(&view);
        let subscription = agent.subscribe_fn(move |event| {
            // A violation is kept and reported by `snapshot`: failing the listener would
            // change the run under test.
            let _ = lock(&sink).push(event);
        });
        Self { view, subscription: Arc::new(Mutex::new(Some(subscription))) }
    }

    /// Stop recording; the events so far stay.
    pub fn detach(&self) {
        if let Some(subscription) = lock(&self.subscription).take() {
            subscription.unsubscribe();
        }
    }

    /// The compact, redacted view of the events so far.
    ///
    /// # Panics
    /// When the events break the run grammar, or a run has not ended yet.
    pub fn snapshot(&self) -> Value {
        match self.try_snapshot() {
            Ok(view) => view,
            Err(error) => panic!("the events break the run grammar: {error}"),
        }
    }

    /// [`EventRecorder::snapshot`] with a grammar violation as an error.
    pub fn try_snapshot(&self) -> Result<Value, GrammarError> {
        lock(&self.view).finish()
    }
}

/// The events seen so far, reduced as they arrive.
#[derive(Default)]
struct CompactView {
    checker: RunsChecker,
    violation: Option<GrammarError>,
    events: Vec<Value>,
    /// Messages ended in the current run and the current turn's tool results: what
    /// `agent_end` and `turn_end` repeat.
    run_messages: Vec<AgentMessage>,
    turn_results: Vec<ToolResultMessage>,
    /// The message of the open `message_start`.
    started: Option<AgentMessage>,
}

impl CompactView {
    fn push(&mut self, event: &AgentEvent) -> Result<(), GrammarError> {
        if let Some(violation) = &self.violation {
            return Err(violation.clone());
        }
        if let Err(violation) = self.checker.step(event) {
            self.violation = Some(violation.clone());
            return Err(violation);
        }
        let view = self.view(event);
        self.events.push(view);
        Ok(())
    }

    fn finish(&self) -> Result<Value, GrammarError> {
        if let Some(violation) = &self.violation {
            return Err(violation.clone());
        }
        self.checker.finish()?;
        let mut ids = HashMap::new();
        Ok(Value::Array(self.events.iter().map(|event| redact(event.clone(), &mut ids)).collect()))
    }

    fn view(&mut self, event: &AgentEvent) -> Value {
        match event {
            AgentEvent::AgentStart => {
                self.run_messages.clear();
                to_value(event)
            }
            AgentEvent::TurnStart => {
                self.turn_results.clear();
                to_value(event)
            }
            AgentEvent::MessageUpdate { message, assistant_message_event } => {
                let mut view = update_view(assistant_message_event);
                let partial = assistant_message_event.partial();
                if partial.is_none_or(|partial| !Arc::ptr_eq(partial, message) && **partial != **message) {
                    view.insert("message".into(), to_value(message));
                }
                Value::Object(view)
            }
            AgentEvent::MessageStart { message } => {
                self.started = Some(message.clone());
                to_value(event)
            }
            AgentEvent::MessageEnd { message } => {
                let unchanged = self.started.take().is_some_and(|started| started == *message);
                self.run_messages.push(message.clone());
                if let AgentMessage::ToolResult(result) = message {
                    self.turn_results.push((**result).clone());
                }
                if unchanged {
                    json!({"type": "message_end", "message": "[as started above]"})
                } else {
                    to_value(event)
                }
            }
            AgentEvent::TurnEnd { message, tool_results } => {
                let mut view = Map::new();
                view.insert("type".into(), json!("turn_end"));
                let repeated = self.run_messages.iter().rev().any(|ended| ended == message);
                view.insert("message".into(), if repeated { json!("[as ended above]") } else { to_value(message) });
                let results = if *tool_results == self.turn_results {
                    if tool_results.is_empty() {
                        json!([])
                    } else {
                        json!(ended_above(tool_results.len(), "tool result"))
                    }
                } else {
                    to_value(tool_results)
                };
                view.insert("toolResults".into(), results);
                Value::Object(view)
            }
            AgentEvent::AgentEnd { messages } => {
                let messages = if *messages == self.run_messages && !messages.is_empty() {
                    json!(ended_above(messages.len(), "message"))
                } else {
                    to_value(messages)
                };
                json!({"type": "agent_end", "messages": messages})
            }
            _ => to_value(event),
        }
    }
}

/// `"[2 messages ended above]"`: a list equal to what the `message_end` events showed.
fn ended_above(count: usize, noun: &str) -> String {
    let plural = if count == 1 { "" } else { "s" };
    format!("[{count} {noun}{plural} ended above]")
}

fn to_value(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or_else(|error| json!(format!("[unserializable: {error}]")))
}

/// A `message_update` without its partial message: the assistant event's type and own fields.
fn update_view(event: &AssistantMessageEvent) -> Map<String, Value> {
    let mut view = Map::new();
    view.insert("type".into(), json!("message_update"));
    view.insert("event".into(), json!(event.type_name()));
    match event {
        AssistantMessageEvent::Start { .. } => {}
        AssistantMessageEvent::TextStart { content_index, .. }
        | AssistantMessageEvent::ThinkingStart { content_index, .. }
        | AssistantMessageEvent::ToolcallStart { content_index, .. } => {
            view.insert("contentIndex".into(), json!(content_index));
        }
        AssistantMessageEvent::TextDelta { content_index, delta, .. }
        | AssistantMessageEvent::ThinkingDelta { content_index, delta, .. }
        | AssistantMessageEvent::ToolcallDelta { content_index, delta, .. } => {
            view.insert("contentIndex".into(), json!(content_index));
            view.insert("delta".into(), json!(delta));
        }
        AssistantMessageEvent::TextEnd { content_index, content, .. }
        | AssistantMessageEvent::ThinkingEnd { content_index, content, .. } => {
            view.insert("contentIndex".into(), json!(content_index));
            view.insert("content".into(), json!(content));
        }
        AssistantMessageEvent::ToolcallEnd { content_index, tool_call, .. } => {
            view.insert("contentIndex".into(), json!(content_index));
            view.insert("toolCall".into(), to_value(&AssistantContent::ToolCall((**tool_call).clone())));
        }
        AssistantMessageEvent::Done { reason, message } => {
            view.insert("reason".into(), to_value(reason));
            view.insert("message".into(), to_value(message));
        }
        AssistantMessageEvent::Error { reason, error } => {
            view.insert("reason".into(), to_value(reason));
            view.insert("error".into(), to_value(error));
        }
    }
    view
}

/// Replace run-dependent values; `ids` numbers the ids in order of first appearance.
fn redact(value: Value, ids: &mut HashMap<String, usize>) -> Value {
    match value {
        Value::Object(map) => {
            let is_tool_call = map.get("type").and_then(Value::as_str) == Some("toolCall");
            let redacted = map
                .into_iter()
                .filter(|(key, _)| key != "durationMs")
                .map(|(key, value)| {
                    let value = match (key.as_str(), value) {
                        ("timestamp", _) => json!("[timestamp]"),
                        ("usage", _) => json!("[usage]"),
                        ("toolCallId" | "responseId", Value::String(id)) => stable_id(id, ids),
                        ("id", Value::String(id)) if is_tool_call => stable_id(id, ids),
                        (_, value) => redact(value, ids),
                    };
                    (key, value)
                })
                .collect();
            Value::Object(redacted)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(|item| redact(item, ids)).collect()),
        other => other,
    }
}

fn stable_id(id: String, ids: &mut HashMap<String, usize>) -> Value {
    let next = ids.len() + 1;
    json!(format!("[id {}]", ids.entry(id).or_insert(next)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_types::{AssistantMessage, StopReason, ToolCall, UserMessage};

    fn assistant(content: Vec<AssistantContent>) -> Arc<AssistantMessage> {
        Arc::new(AssistantMessage {
            content,
            stop_reason: StopReason::ToolUse,
            timestamp: 7,
            duration_ms: Some(12),
            ..Default::default()
        })
    }

    #[test]
    fn updates_drop_the_partial_and_ids_stay_linked() {
        let call = ToolCall { id: "call_xyz".into(), name: "echo".into(), ..Default::default() };
        let partial = assistant(vec![AssistantContent::ToolCall(call.clone())]);
        let update = AgentEvent::MessageUpdate {
            message: Arc::clone(&partial),
            assistant_message_event: AssistantMessageEvent::ToolcallEnd {
                content_index: 0,
                tool_call: Box::new(call),
                partial: Arc::clone(&partial),
            },
        };
        let user = AgentMessage::from(UserMessage::text("go"));
        let events = vec![
            AgentEvent::AgentStart,
            AgentEvent::TurnStart,
            AgentEvent::MessageStart { message: user.clone() },
            AgentEvent::MessageEnd { message: user.clone() },
            AgentEvent::MessageStart { message: AgentMessage::Assistant(assistant(vec![])) },
            update,
            AgentEvent::MessageEnd { message: AgentMessage::Assistant(Arc::clone(&partial)) },
            AgentEvent::ToolExecutionStart {
                tool_call_id: "call_xyz".into(),
                tool_name: "echo".into(),
                args: Box::new(json!({})),
            },
        ];
        let view = try_events_snapshot(&events);
        assert_eq!(view.map_err(|e| e.problem), Err("a run never ended".to_owned()));
        let mut view = CompactView::default();
        for event in &events {
            view.push(event).expect("grammar");
        }
        assert_eq!(view.events[3]["message"], "[as started above]");
        assert_eq!(view.events[6]["message"]["role"], "assistant", "an assistant message changes while it streams");
        let update = &view.events[5];
        assert_eq!(update["event"], "toolcall_end");
        assert!(update.get("message").is_none() && update.get("partial").is_none(), "{update}");
        let mut ids = HashMap::new();
        let redacted: Vec<Value> = view.events.iter().map(|e| redact(e.clone(), &mut ids)).collect();
        assert_eq!(redacted[5]["toolCall"]["id"], "[id 1]");
        assert_eq!(redacted[7]["toolCallId"], "[id 1]");
        assert_eq!(redacted[6]["message"]["timestamp"], "[timestamp]");
        assert_eq!(view.events[6]["message"]["durationMs"], 12);
        assert!(redacted[6]["message"].get("durationMs").is_none(), "{}", redacted[6]);
    }

    #[test]
    fn a_grammar_violation_is_reported() {
        let error = try_events_snapshot(&[AgentEvent::TurnStart]).map_err(|e| (e.index, e.event));
        assert_eq!(error, Err((0, "turn_start")));
    }

    #[test]
    fn repeated_messages_are_shown_when_they_differ() {
        let user = AgentMessage::from(UserMessage::text("go"));
        let other = AgentMessage::from(UserMessage::text("something else"));
        let events = vec![
            AgentEvent::AgentStart,
            AgentEvent::MessageStart { message: user.clone() },
            AgentEvent::MessageEnd { message: user.clone() },
            AgentEvent::AgentEnd { messages: vec![other] },
        ];
        let view = events_snapshot(&events);
        assert_eq!(view[3]["messages"][0]["content"], "something else");
        let same = [&events[..3], &[AgentEvent::AgentEnd { messages: vec![user] }]].concat();
        assert_eq!(events_snapshot(&same)[3]["messages"], "[1 message ended above]");
    }
}
