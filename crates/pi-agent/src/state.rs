//! The observable state of an agent and the reducer that keeps it current.

use std::sync::Arc;

use pi_types::transcript::current_system_prompt;

use crate::pending::PendingToolCalls;
use pi_types::{
    AgentEvent, AgentMessage, AgentTool, AssistantContent, AssistantMessage, AssistantMessageEvent, MessageList, Model,
    ThinkingLevel,
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
    /// An assistant response in progress is the agent's copy, brought up to date per event in
    /// time proportional to the change (holding the provider's partial would make the provider
    /// copy the whole message per delta): text, thinking and metadata exactly; the partial
    /// arguments of a tool call being streamed are refreshed whenever their text has doubled
    /// (so the copies add up to linear time) and exactly at the call's end. So while the
    /// listeners of a `toolcall_delta` run, it is the event's own partial message instead,
    /// and it equals the event's partial while any update's listeners run.
    pub streaming_message: Option<StreamingMessage>,
    /// Ids of tool calls between `tool_execution_start` and `tool_execution_end`, in start order.
    pub pending_tool_calls: Arc<PendingToolCalls>,
    /// Error text of the last failed turn of the current or last run.
    pub error_message: Option<String>,
    /// The agent's copy of the streaming assistant message while a `toolcall_delta`'s
    /// listeners see the event's partial (see `streaming_message`).
    own_partial: Option<Arc<AssistantMessage>>,
    /// Amortizes copying the arguments of the tool call being streamed.
    arguments: ArgumentRefresh,
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
            own_partial: None,
            arguments: ArgumentRefresh::default(),
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
        self.arguments = ArgumentRefresh::default();
    }

    /// After an update's listeners ran: drop the event's partial (the provider then applies its
    /// next delta in place) and show the agent's copy.
    pub(crate) fn release_partial(&mut self) {
        if let Some(own) = self.own_partial.take() {
            self.streaming_message = Some(StreamingMessage::Assistant(own));
        }
    }

    /// The common update, a text or thinking delta to the copy the listeners see, with nothing
    /// but that block's text changed: appended in place. `false` when the update is another
    /// kind (then [`reduce`](Self::reduce) takes its general path, which gives the same result).
    fn append_delta(&mut self, partial: &AssistantMessage, event: &AssistantMessageEvent) -> bool {
        let Some(index) = event.content_index() else { return false };
        if !matches!(event, AssistantMessageEvent::TextDelta { .. } | AssistantMessageEvent::ThinkingDelta { .. }) {
            return false;
        }
        let Some(StreamingMessage::Assistant(own)) = &mut self.streaming_message else { return false };
        if self.own_partial.is_some() || own.content.len() != partial.content.len() {
            return false;
        }
        // Unique unless a snapshot holds it: then copied once (copy on write).
        match (Arc::make_mut(own).content.get_mut(index), partial.content.get(index)) {
            (Some(mine), Some(theirs)) => append_block_delta(mine, theirs, event),
            _ => false,
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
                self.arguments = ArgumentRefresh::default();
                self.streaming_message = Some(match message {
                    AgentMessage::Assistant(assistant) => StreamingMessage::Assistant(Arc::clone(assistant)),
                    other => StreamingMessage::Other(Arc::new(other.clone())),
                });
            }
            AgentEvent::MessageUpdate { message, assistant_message_event } => {
                if !metadata_changed && self.append_delta(message, assistant_message_event) {
                    return false;
                }
                let mut own = match self.own_partial.take().or_else(|| match self.streaming_message.take() {
                    Some(StreamingMessage::Assistant(own)) => Some(own),
                    _ => None,
                }) {
                    Some(own) => own,
                    None => Arc::new((**message).clone()),
                };
                // Unique unless a snapshot holds it: then copied once (copy on write).
                let own_message = Arc::make_mut(&mut own);
                apply_update(own_message, message, assistant_message_event, metadata_changed, &mut self.arguments);
                if !matches!(assistant_message_event, AssistantMessageEvent::ToolcallDelta { .. }) {
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

#[inline]
fn metadata_matches(own: &AssistantMessage, partial: &AssistantMessage) -> bool {
    // Destructured so that a new field cannot be forgotten here.
    let AssistantMessage {
        content: _,
        api,
        provider,
        model,
        response_model,
        response_id,
        provider_thinking_level,
        thinking_level,
        diagnostics,
        usage,
        stop_reason,
        deferred,
        error_message,
        raw_stop_reason,
        end_turn,
        timestamp,
        duration_ms,
    } = partial;
    own.timestamp == *timestamp
        && own.stop_reason == *stop_reason
        && own.usage == *usage
        && own.duration_ms == *duration_ms
        && own.end_turn == *end_turn
        && own.thinking_level == *thinking_level
        && own.response_id == *response_id
        && own.response_model == *response_model
        && own.provider_thinking_level == *provider_thinking_level
        && own.error_message == *error_message
        && own.raw_stop_reason == *raw_stop_reason
        && own.diagnostics == *diagnostics
        && own.deferred == *deferred
        && own.model == *model
        && own.provider == *provider
        && own.api == *api
}

fn sync<T: PartialEq + Clone>(target: &mut T, source: &T) {
    if target != source {
        target.clone_from(source);
    }
}

/// Bring `own` to `partial` (the message right after `event`) in time proportional to the
/// change: deltas are appended, other blocks copied when they start or end, metadata compared
/// when `metadata_changed` (the stream tells whether it may have changed). Anything unexpected
/// falls back to copying the block or the whole message, so `own` always ends equal to
/// `partial`.
fn apply_update(
    own: &mut AssistantMessage,
    partial: &AssistantMessage,
    event: &AssistantMessageEvent,
    metadata_changed: bool,
    arguments: &mut ArgumentRefresh,
) {
    // Metadata is compared only when the stream says it may have changed.
    let refresh_metadata = |own: &mut AssistantMessage| {
        if metadata_changed {
            sync_metadata(own, partial);
        }
    };
    let content = &partial.content;
    if own.content.len() > content.len() || content.len() > own.content.len() + 1 {
        *own = partial.clone();
        return;
    }
    own.content.truncate(content.len());
    // A block the event started is copied whole (it is new, so small). Blocks other than the
    // event's are final or unchanged, so only the event's block is looked at: an update costs
    // O(change), not O(blocks).
    let known = own.content.len();
    if let Some(block) = content.get(known) {
        own.content.push(block.clone());
    }
    let Some(index) = event.content_index() else {
        return refresh_metadata(own);
    };
    if index >= known {
        // The event's block was just copied whole; a tool call's argument copies start over.
        if matches!(event, AssistantMessageEvent::ToolcallStart { .. }) {
            *arguments = ArgumentRefresh::default();
        }
        return refresh_metadata(own);
    }
    if let (Some(mine), Some(theirs)) = (own.content.get_mut(index), content.get(index)) {
        if append_block_delta(mine, theirs, event) {
            return refresh_metadata(own);
        }
        match (mine, theirs, event) {
            // Tool-call arguments are re-parsed per delta: copied when their text has doubled,
            // so the copies stay linear in total.
            (mine, theirs, AssistantMessageEvent::ToolcallDelta { delta, .. }) => {
                if arguments.streamed(delta.len()) {
                    mine.clone_from(theirs);
                }
            }
            (mine, theirs, AssistantMessageEvent::ToolcallStart { .. } | AssistantMessageEvent::ToolcallEnd { .. }) => {
                *arguments = ArgumentRefresh::default();
                mine.clone_from(theirs);
            }
            // Block ends may finalize; anything unexpected is copied.
            (mine, theirs, _) => mine.clone_from(theirs),
        }
    }
    refresh_metadata(own);
}

/// Appends a text or thinking delta to the copy's block `mine`, then makes it equal to the
/// partial's block `theirs` if anything else differs. `false`, changing nothing, for other
/// events or blocks of another kind.
// Always inlined: it runs per delta, and as a call (it has two callers) it cost about 36
// instructions per delta more.
#[inline(always)]
fn append_block_delta(mine: &mut AssistantContent, theirs: &AssistantContent, event: &AssistantMessageEvent) -> bool {
    match (mine, theirs, event) {
        (
            AssistantContent::Text(mine),
            AssistantContent::Text(theirs),
            AssistantMessageEvent::TextDelta { delta, .. },
        ) => {
            mine.text.push_str(delta);
            if mine.text.len() != theirs.text.len() || mine.text_signature != theirs.text_signature {
                mine.clone_from(theirs);
            }
            true
        }
        (
            AssistantContent::Thinking(mine),
            AssistantContent::Thinking(theirs),
            AssistantMessageEvent::ThinkingDelta { delta, .. },
        ) => {
            mine.thinking.push_str(delta);
            if mine.thinking.len() != theirs.thinking.len()
                || mine.thinking_signature != theirs.thinking_signature
                || mine.redacted != theirs.redacted
            {
                mine.clone_from(theirs);
            }
            true
        }
        _ => false,
    }
}

/// Bring the message's fields other than `content` to `partial`'s.
fn sync_metadata(own: &mut AssistantMessage, partial: &AssistantMessage) {
    // Metadata rarely changes mid-stream: one inlined comparison, cheapest fields first,
    // settles the common case without a call per field.
    if metadata_matches(own, partial) {
        return;
    }
    let AssistantMessage {
        content: _,
        api,
        provider,
        model,
        response_model,
        response_id,
        provider_thinking_level,
        thinking_level,
        diagnostics,
        usage,
        stop_reason,
        deferred,
        error_message,
        raw_stop_reason,
        end_turn,
        timestamp,
        duration_ms,
    } = partial;
    sync(&mut own.api, api);
    sync(&mut own.provider, provider);
    sync(&mut own.model, model);
    sync(&mut own.response_model, response_model);
    sync(&mut own.response_id, response_id);
    sync(&mut own.provider_thinking_level, provider_thinking_level);
    sync(&mut own.thinking_level, thinking_level);
    sync(&mut own.diagnostics, diagnostics);
    sync(&mut own.usage, usage);
    sync(&mut own.stop_reason, stop_reason);
    sync(&mut own.deferred, deferred);
    sync(&mut own.error_message, error_message);
    sync(&mut own.raw_stop_reason, raw_stop_reason);
    sync(&mut own.end_turn, end_turn);
    sync(&mut own.timestamp, timestamp);
    sync(&mut own.duration_ms, duration_ms);
}

/// When to copy the partial arguments of the tool call being streamed: whenever the argument
/// text has doubled since the last copy. Copy sizes then form a geometric series, so a call
/// whose arguments are n characters costs O(n) in copies instead of O(n²).
#[derive(Clone, Copy, Debug, Default)]
struct ArgumentRefresh {
    /// Argument text streamed so far.
    streamed: usize,
    /// Argument text at the last copy.
    copied: usize,
    /// Copies made (for the tests that guard the bound).
    copies: usize,
}

impl ArgumentRefresh {
    /// `delta_len` more characters arrived; whether to copy now.
    fn streamed(&mut self, delta_len: usize) -> bool {
        self.streamed = self.streamed.saturating_add(delta_len);
        if self.streamed < self.copied.saturating_mul(2).max(64) {
            return false;
        }
        self.copied = self.streamed;
        self.copies += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_types::{StopReason, ToolCall};
    use serde_json::{json, Map};

    fn with_arguments(text: &str) -> AssistantMessage {
        let mut arguments = Map::new();
        arguments.insert("content".into(), json!(text));
        let call = ToolCall { id: "c".into(), name: "write".into(), arguments, ..Default::default() };
        AssistantMessage { content: vec![AssistantContent::ToolCall(call)], ..Default::default() }
    }

    /// A tool call with a 100,000-character argument: the agent's copy of the arguments is
    /// refreshed O(log n) times, not once per delta, and is exact at the call's end.
    #[test]
    fn streaming_a_long_argument_copies_it_a_logarithmic_number_of_times() {
        let mut state = AgentState::new(Arc::default(), ThinkingLevel::Off, Vec::new(), Vec::new());
        let _ = state.reduce(&AgentEvent::MessageStart { message: AssistantMessage::default().into() }, true);
        let mut text = String::new();
        let deltas = 25_000;
        for _ in 0..deltas {
            text.push_str("abcd");
            let partial = Arc::new(with_arguments(&text));
            let event = AssistantMessageEvent::ToolcallDelta {
                content_index: 0,
                delta: "abcd".into(),
                partial: Arc::clone(&partial),
            };
            if state.reduce(&AgentEvent::MessageUpdate { message: partial, assistant_message_event: event }, true) {
                state.release_partial();
            }
        }
        assert!(state.arguments.copies <= 20, "{} copies for {deltas} deltas", state.arguments.copies);
        let done = Arc::new(AssistantMessage { stop_reason: StopReason::ToolUse, ..with_arguments(&text) });
        let AssistantContent::ToolCall(call) = done.content[0].clone() else { unreachable!() };
        let end = AssistantMessageEvent::ToolcallEnd {
            content_index: 0,
            tool_call: Box::new(call),
            partial: Arc::clone(&done),
        };
        if state.reduce(&AgentEvent::MessageUpdate { message: Arc::clone(&done), assistant_message_event: end }, true) {
            state.release_partial();
        }
        assert_eq!(state.streaming_message.as_ref().and_then(StreamingMessage::as_assistant), Some(&*done));
    }

    /// A block whose first event is a delta (no start) is copied once, not appended twice.
    #[test]
    fn a_block_first_seen_on_a_delta_is_copied_once() {
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
            if state.reduce(
                &AgentEvent::MessageUpdate { message: Arc::clone(&partial), assistant_message_event: event },
                true,
            ) {
                state.release_partial();
            }
            assert_eq!(state.streaming_message.as_ref().and_then(StreamingMessage::as_assistant), Some(&*partial));
        }
    }
}
