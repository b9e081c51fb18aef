//! The observable state of an agent and the reducer that keeps it current.

use std::sync::Arc;

use pi_types::transcript::current_system_prompt;

use crate::pending::PendingToolCalls;
use crate::usage::UsageTotals;
use pi_loop::MessageList;
use pi_types::{
    AgentEvent, AgentMessage, AgentTool, AssistantMessage, AssistantMessageEvent, Model, StreamFollower, ThinkingLevel,
};

/// The message being streamed: what the last `message_start` / `message_update` carried.
#[derive(Clone, Debug)]
pub enum StreamingMessage {
    /// An assistant response in progress (copy on write: a snapshot someone keeps stays as it
    /// was; see [`AgentState::streaming_message`]).
    Assistant(Arc<AssistantMessage>),
    /// Another message between its `message_start` and `message_end`.
    Other(Arc<AgentMessage>),
}

impl StreamingMessage {
    /// The message as a transcript entry (a copy).
    pub fn to_message(&self) -> AgentMessage {
        match self {
            Self::Assistant(message) => AgentMessage::Assistant(Arc::new((**message).clone())),
            Self::Other(message) => (**message).clone(),
        }
    }

    /// The assistant message, if this is one.
    pub fn as_assistant(&self) -> Option<&AssistantMessage> {
        match self {
            Self::Assistant(message) => Some(message),
            Self::Other(message) => message.as_assistant(),
        }
    }
}

/// A snapshot of an agent's state (the reference's `agent.state`).
///
/// Taking one is cheap: the transcript, the tools and the model are shared (`Arc`), never
/// copied. The agent replaces its shared lists on change (copy on write), so a snapshot
/// stays as it was taken.
#[derive(Clone)]
pub struct AgentState {
    /// Model of the next request.
    pub model: Arc<Model>,
    /// Thinking level of the next run.
    pub thinking_level: ThinkingLevel,
    /// Executable tools.
    pub tools: Arc<[Arc<dyn AgentTool>]>,
    /// The transcript (shared structurally: a snapshot and the run hold it without copies).
    pub messages: MessageList,
    /// Whether a run is active (until its `agent_end` listeners finished).
    pub is_streaming: bool,
    /// The message being streamed, if any.
    ///
    /// An assistant response in progress is the agent's copy, brought up to date per event by
    /// a [`StreamFollower`] in time proportional to the change (holding the provider's partial
    /// would make the provider copy the whole message per delta). The partial arguments of a
    /// tool call being streamed may lag in the copy, so while the listeners of a
    /// `toolcall_delta` run, it is the event's own partial message instead: it equals the
    /// event's partial while any update's listeners run.
    pub streaming_message: Option<StreamingMessage>,
    /// Ids of tool calls between `tool_execution_start` and `tool_execution_end`, in start order.
    pub pending_tool_calls: Arc<PendingToolCalls>,
    /// Error text of the last failed turn of the current or last run.
    pub error_message: Option<String>,
    /// Tokens and cost of the current (or last) run and of every run.
    pub usage: UsageTotals,
    /// The agent's copy of the streaming assistant message while a `toolcall_delta`'s
    /// listeners see the event's partial (see `streaming_message`).
    own_partial: Option<Arc<AssistantMessage>>,
    /// Keeps the agent's copy of the streaming assistant message current.
    follower: StreamFollower,
}

impl std::fmt::Debug for AgentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(|t| t.spec().name()).collect();
        f.debug_struct("AgentState")
            .field("model", &self.model.id)
            .field("thinking_level", &self.thinking_level)
            .field("tools", &tools)
            .field("messages", &self.messages.len())
            .field("is_streaming", &self.is_streaming)
            .field("streaming", &self.streaming_message.is_some())
            .field("pending_tool_calls", &self.pending_tool_calls)
            .field("error_message", &self.error_message)
            .field("usage", &self.usage)
            .finish()
    }
}

impl AgentState {
    pub(crate) fn new(
        model: Arc<Model>,
        thinking_level: ThinkingLevel,
        tools: Vec<Arc<dyn AgentTool>>,
        messages: Vec<AgentMessage>,
    ) -> Self {
        Self {
            model,
            thinking_level,
            tools: tools.into(),
            messages: messages.into(),
            is_streaming: false,
            streaming_message: None,
            pending_tool_calls: PendingToolCalls::shared_empty(),
            error_message: None,
            usage: UsageTotals::default(),
            own_partial: None,
            follower: StreamFollower::default(),
        }
    }

    /// A snapshot (the listeners' view while an update is delivered).
    pub(crate) fn snapshot(&self) -> Self {
        let mut snapshot = self.clone();
        snapshot.own_partial = None;
        snapshot
    }

    /// The message being streamed right now.
    pub(crate) fn current_streaming_message(&self) -> Option<StreamingMessage> {
        self.streaming_message.clone()
    }

    /// No message is streaming.
    pub(crate) fn clear_streaming(&mut self) {
        self.streaming_message = None;
        self.own_partial = None;
        self.follower = StreamFollower::default();
    }

    /// After an update's listeners ran: drop the event's partial (the provider then applies its
    /// next delta in place) and show the agent's copy.
    pub(crate) fn release_partial(&mut self) {
        if let Some(own) = self.own_partial.take() {
            self.streaming_message = Some(StreamingMessage::Assistant(own));
        }
    }

    /// The system prompt: the replay of every system message of the transcript.
    pub fn system_prompt(&self) -> String {
        current_system_prompt(self.messages.systems())
    }

    /// Apply one event, as the reference's `processEvents` does before calling listeners.
    /// `metadata_changed`: for an update, whether the partial's fields other than `content` may
    /// differ from the previous update's (when not, the copy's are not compared). Returns
    /// whether [`release_partial`](Self::release_partial) is due once they ran.
    #[must_use = "a held partial must be released after the listeners"]
    pub(crate) fn reduce(&mut self, event: &AgentEvent, metadata_changed: bool) -> bool {
        match event {
            AgentEvent::MessageStart { message } => {
                self.own_partial = None;
                self.follower = StreamFollower::default();
                self.streaming_message = Some(match message {
                    AgentMessage::Assistant(assistant) => StreamingMessage::Assistant(Arc::clone(assistant)),
                    other => StreamingMessage::Other(Arc::new(other.clone())),
                });
            }
            AgentEvent::MessageUpdate { message, assistant_message_event } => {
                // The common case, changed in place: the copy is shown and will be again.
                if let (None, Some(StreamingMessage::Assistant(own))) = (&self.own_partial, &mut self.streaming_message)
                {
                    if !matches!(assistant_message_event, AssistantMessageEvent::ToolcallDelta { .. }) {
                        self.follower.apply(own, assistant_message_event, metadata_changed);
                        return false;
                    }
                }
                let mut own = match self.own_partial.take().or_else(|| match self.streaming_message.take() {
                    Some(StreamingMessage::Assistant(own)) => Some(own),
                    _ => None,
                }) {
                    Some(own) => own,
                    None => Arc::new((**message).clone()),
                };
                // Unique unless a snapshot holds it: then copied once (copy on write).
                if self.follower.apply(&mut own, assistant_message_event, metadata_changed) {
                    // The copy equals the partial now: the listeners see it.
                    self.streaming_message = Some(StreamingMessage::Assistant(own));
                    return false;
                }
                // The copy's arguments may lag: the listeners see the event's partial itself,
                // released afterwards.
                self.own_partial = Some(own);
                self.streaming_message = Some(StreamingMessage::Assistant(Arc::clone(message)));
                return true;
            }
            AgentEvent::MessageEnd { message } => {
                self.clear_streaming();
                if let AgentMessage::Assistant(assistant) = message {
                    self.usage.run.add(&assistant.usage);
                    self.usage.total.add(&assistant.usage);
                }
                self.messages.push(message.clone());
            }
            // A set in insertion order, changed in place unless a snapshot holds it (then
            // copied once: copy on write, so snapshots stay as they were).
            AgentEvent::ToolExecutionStart { tool_call_id, .. } if !self.pending_tool_calls.contains(tool_call_id) => {
                Arc::make_mut(&mut self.pending_tool_calls).insert(tool_call_id);
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, .. } if self.pending_tool_calls.contains(tool_call_id) => {
                Arc::make_mut(&mut self.pending_tool_calls).remove(tool_call_id);
            }
            AgentEvent::TurnEnd { message: AgentMessage::Assistant(message), .. } => {
                // JavaScript truthiness: an empty error text does not count.
                if let Some(error) = message.error_message.as_ref().filter(|e| !e.is_empty()) {
                    self.error_message = Some(error.to_string());
                }
            }
            AgentEvent::AgentEnd { .. } => self.clear_streaming(),
            _ => {}
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_types::{AssistantContent, AssistantMessageEvent};

    fn update(state: &mut AgentState, event: AssistantMessageEvent) {
        let Some(partial) = event.partial().cloned() else { return };
        if state.reduce(&AgentEvent::MessageUpdate { message: partial, assistant_message_event: event }, true) {
            state.release_partial();
        }
    }

    /// While a `toolcall_delta`'s listeners run they see the event's partial; afterwards the
    /// agent's copy, which is exact again at the call's end. Text deltas show the copy at once.
    #[test]
    fn the_streaming_message_equals_each_update_partial() {
        let mut state = AgentState::new(Arc::default(), ThinkingLevel::Off, Vec::new(), Vec::new());
        let _ = state.reduce(&AgentEvent::MessageStart { message: AssistantMessage::default().into() }, true);
        for (text, delta) in [("ab", "ab"), ("abc", "c")] {
            let partial =
                Arc::new(AssistantMessage { content: vec![AssistantContent::text(text)], ..Default::default() });
            let event = AssistantMessageEvent::TextDelta {
                content_index: 0,
                delta: delta.into(),
                partial: Arc::clone(&partial),
            };
            update(&mut state, event);
            assert_eq!(state.streaming_message.as_ref().and_then(StreamingMessage::as_assistant), Some(&*partial));
        }
        let _ = state.reduce(&AgentEvent::AgentEnd { messages: Vec::new() }, true);
        assert!(state.streaming_message.is_none());
    }
}
