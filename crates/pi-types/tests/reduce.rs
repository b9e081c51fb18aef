//! `StreamFollower`: a copy of a streamed message kept current in time proportional to the change.

use std::sync::Arc;

use pi_types::{AssistantContent, AssistantMessage, AssistantMessageEvent, StreamFollower};
use pi_types::{StopReason, ToolCall};
use serde_json::{json, Map};

fn with_arguments(text: &str) -> AssistantMessage {
    let mut arguments = Map::new();
    arguments.insert("content".into(), json!(text));
    let call = ToolCall { id: "c".into(), name: "write".into(), arguments, ..Default::default() };
    AssistantMessage { content: vec![AssistantContent::ToolCall(call)], ..Default::default() }
}

/// A tool call with a 100,000-character argument: the copy's arguments are refreshed
/// O(log n) times, not once per delta, and are exact at the call's end.
#[test]
fn streaming_a_long_argument_copies_it_a_logarithmic_number_of_times() {
    let mut copy = Arc::new(AssistantMessage::default());
    let mut follower = StreamFollower::default();
    let mut text = String::new();
    let deltas = 25_000;
    for _ in 0..deltas {
        text.push_str("abcd");
        let partial = Arc::new(with_arguments(&text));
        let event = AssistantMessageEvent::ToolcallDelta { content_index: 0, delta: "abcd".into(), partial };
        follower.apply(&mut copy, &event, true);
    }
    let copies = follower.argument_copies();
    assert!(copies <= 20, "{copies} copies for {deltas} deltas");
    let done = Arc::new(AssistantMessage { stop_reason: StopReason::ToolUse, ..with_arguments(&text) });
    let Some(AssistantContent::ToolCall(call)) = done.content.first().cloned() else { panic!("a tool call") };
    let end =
        AssistantMessageEvent::ToolcallEnd { content_index: 0, tool_call: Box::new(call), partial: Arc::clone(&done) };
    assert!(follower.apply(&mut copy, &end, true));
    assert_eq!(copy, done);
}

/// A block whose first event is a delta (no start) is copied once, not appended twice.
#[test]
fn a_block_first_seen_on_a_delta_is_copied_once() {
    let mut copy = Arc::new(AssistantMessage::default());
    let mut follower = StreamFollower::default();
    for (text, delta) in [("ab", "ab"), ("abc", "c")] {
        let partial = Arc::new(AssistantMessage { content: vec![AssistantContent::text(text)], ..Default::default() });
        let event =
            AssistantMessageEvent::TextDelta { content_index: 0, delta: delta.into(), partial: Arc::clone(&partial) };
        assert!(follower.apply(&mut copy, &event, false));
        assert_eq!(copy, partial);
    }
}

/// Metadata is compared only when the stream says it may have changed; a change it reports
/// is copied.
#[test]
fn metadata_follows_when_reported() {
    let mut copy = Arc::new(AssistantMessage { content: vec![AssistantContent::text("")], ..Default::default() });
    let mut next = AssistantMessage { content: vec![AssistantContent::text("a")], ..Default::default() };
    next.usage.output = 3;
    let partial = Arc::new(next);
    let event = AssistantMessageEvent::TextDelta { content_index: 0, delta: "a".into(), partial: Arc::clone(&partial) };
    assert!(StreamFollower::default().apply(&mut copy, &event, true));
    assert_eq!(copy, partial);
}
