//! Following a streamed response: a copy of its message kept current from its events.
//!
//! # Protocol
//! A provider's [`AssistantMessageBuilder`](crate::AssistantMessageBuilder) grows one message in
//! place and lends it with every event as the event's `partial`. A consumer that must keep the
//! message between events (the agent's observable state, a stream whose producer may end without
//! a terminal event) cannot keep the partial itself: holding it makes the builder copy the whole
//! message on its next delta. It keeps its own copy and hands it, with a [`StreamFollower`],
//! each event in order from `start` on; [`StreamFollower::apply`] is the one function that
//! applies an event to a message.
//!
//! Each step costs time proportional to what the event changed: a delta is appended, a block
//! is copied when an event other than a delta names it, the fields beside `content` are compared
//! only when the stream says they may have changed. The partial arguments of a streamed tool
//! call, which the producer re-parses per delta, are copied whenever their text has doubled (so
//! the copies add up to linear time) and at the call's end. Anything unexpected (a block
//! skipped, content that shrank) falls back to copying the block or the message, so the copy
//! always ends equal to the partial, apart from those lagging arguments.

use std::sync::Arc;

use crate::content::AssistantContent;
use crate::event::AssistantMessageEvent;
use crate::message::AssistantMessage;

/// Keeps a copy of a streaming assistant message current, event by event, in time proportional
/// to each change (docs/architecture.md, "The growing message"). It holds what following needs
/// beyond the copy itself (how far the arguments of a streamed tool call were copied); the
/// caller keeps the copy where it likes.
///
/// ```
/// use std::sync::Arc;
/// use pi_types::{AssistantContent, AssistantMessage, AssistantMessageEvent, StreamFollower};
///
/// let start = AssistantMessage { content: vec![AssistantContent::text("")], ..Default::default() };
/// let mut copy = Arc::new(start);
/// let mut follower = StreamFollower::default();
/// let partial = Arc::new(AssistantMessage { content: vec![AssistantContent::text("Hi")], ..Default::default() });
/// let delta = AssistantMessageEvent::TextDelta { content_index: 0, delta: "Hi".into(), partial: Arc::clone(&partial) };
/// assert!(follower.apply(&mut copy, &delta, true));
/// assert_eq!(copy, partial);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct StreamFollower {
    arguments: ArgumentRefresh,
}

impl StreamFollower {
    /// Apply `event` (a block event of the response; others change nothing) to `copy`, which
    /// is changed in place unless somebody else holds it (then copied once: copy on write).
    /// `metadata_changed`: whether the partial's fields other than `content` may differ from the
    /// previous event's (see
    /// [`AssistantMessageEventStream::metadata_changed`](crate::AssistantMessageEventStream::metadata_changed));
    /// pass `true` when unsure. Returns whether the copy now equals the event's partial; `false`
    /// only after a `toolcall_delta` whose arguments the copy has not caught up with yet.
    // Inlined into its callers (in other crates too): the common delta is a few instructions
    // there, the rest is `apply_slow`. `inline(always)`: a plain hint left it a call in the
    // agent's reducer, which costs per delta (docs/performance.md, "Why the code is shaped so").
    #[inline(always)]
    pub fn apply(
        &mut self,
        copy: &mut Arc<AssistantMessage>,
        event: &AssistantMessageEvent,
        metadata_changed: bool,
    ) -> bool {
        let Some(partial) = event.partial() else { return true };
        if !metadata_changed && append_delta(copy, partial, event) {
            return true;
        }
        self.apply_slow(copy, partial, event, metadata_changed)
    }

    #[inline(never)]
    fn apply_slow(
        &mut self,
        copy: &mut Arc<AssistantMessage>,
        partial: &AssistantMessage,
        event: &AssistantMessageEvent,
        metadata_changed: bool,
    ) -> bool {
        apply_update(Arc::make_mut(copy), partial, event, metadata_changed, &mut self.arguments);
        !matches!(event, AssistantMessageEvent::ToolcallDelta { .. })
    }

    /// How many times the arguments of streamed tool calls were copied (for tests that guard
    /// the linear bound).
    pub fn argument_copies(&self) -> usize {
        self.arguments.copies
    }
}

/// The common step, a text or thinking delta with nothing but that block's text changed:
/// appended in place. `false` when the event is another kind (then the general path, which
/// gives the same result, is taken).
#[inline(always)]
fn append_delta(copy: &mut Arc<AssistantMessage>, partial: &AssistantMessage, event: &AssistantMessageEvent) -> bool {
    let Some(index) = event.content_index() else { return false };
    if !matches!(event, AssistantMessageEvent::TextDelta { .. } | AssistantMessageEvent::ThinkingDelta { .. }) {
        return false;
    }
    if copy.content.len() != partial.content.len() {
        return false;
    }
    match (Arc::make_mut(copy).content.get_mut(index), partial.content.get(index)) {
        (Some(mine), Some(theirs)) => append_block_delta(mine, theirs, event),
        _ => false,
    }
}

/// Bring `own` to `partial` (the message right after `event`) in time proportional to the
/// change; see the [module docs](self).
fn apply_update(
    own: &mut AssistantMessage,
    partial: &AssistantMessage,
    event: &AssistantMessageEvent,
    metadata_changed: bool,
    arguments: &mut ArgumentRefresh,
) {
    let refresh_metadata = |own: &mut AssistantMessage| {
        if metadata_changed {
            sync_metadata(own, partial);
        }
    };
    let content = &partial.content;
    if own.content.len() > content.len() || content.len() > own.content.len().saturating_add(1) {
        *own = partial.clone();
        return;
    }
    // A block the event started is copied whole (it is new, so small). Blocks other than the
    // event's are final or unchanged, so only the event's block is looked at: a step costs
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
        // Copied only where it differs: at a block's end the copy is usually equal already (a
        // text's deltas were appended; a call sent whole had its arguments from its start), and
        // comparing reads what a copy would read without allocating.
        match event {
            AssistantMessageEvent::ToolcallDelta { delta, .. } => {
                if arguments.streamed(delta.len()) {
                    sync(mine, theirs);
                }
            }
            AssistantMessageEvent::ToolcallStart { .. } | AssistantMessageEvent::ToolcallEnd { .. } => {
                *arguments = ArgumentRefresh::default();
                sync(mine, theirs);
            }
            // Block ends may finalize; anything unexpected is copied.
            _ => sync(mine, theirs),
        }
    }
    refresh_metadata(own);
}

/// Appends a text or thinking delta to the copy's block `mine`, then makes it equal to the
/// partial's block `theirs` if anything else differs. `false`, changing nothing, for other
/// events or blocks of another kind.
// Always inlined: it runs per delta, and a call (it has two callers) costs per delta.
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

/// Bring the message's fields other than `content` to `partial`'s. Metadata rarely changes
/// mid-stream: each field is compared (cheapest first) and copied only when it differs.
fn sync_metadata(own: &mut AssistantMessage, partial: &AssistantMessage) {
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
    sync(&mut own.timestamp, timestamp);
    sync(&mut own.stop_reason, stop_reason);
    sync(&mut own.usage, usage);
    sync(&mut own.duration_ms, duration_ms);
    sync(&mut own.end_turn, end_turn);
    sync(&mut own.thinking_level, thinking_level);
    sync(&mut own.response_id, response_id);
    sync(&mut own.response_model, response_model);
    sync(&mut own.provider_thinking_level, provider_thinking_level);
    sync(&mut own.error_message, error_message);
    sync(&mut own.raw_stop_reason, raw_stop_reason);
    sync(&mut own.diagnostics, diagnostics);
    sync(&mut own.deferred, deferred);
    sync(&mut own.model, model);
    sync(&mut own.provider, provider);
    sync(&mut own.api, api);
}

#[inline(always)]
fn sync<T: PartialEq + Clone>(target: &mut T, source: &T) {
    if target != source {
        target.clone_from(source);
    }
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
    /// Copies made.
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
        self.copies = self.copies.saturating_add(1);
        true
    }
}
