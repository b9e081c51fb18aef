//! The transcript rules for system messages, one test per rule.
#![allow(clippy::unwrap_used)]

use pi_types::transcript::{
    collapse_system_messages, create_initial_system_message, current_system_message, current_system_prompt,
    current_tools, declarations_equal, has_non_additive_tool_changes, normalize_context, render_system_message_update,
    resolve_transcript, resolve_transcript_tools, tool_state_changes, TranscriptToolSupport,
};
use pi_types::{Context, Message, SystemContent, SystemMessage, Tool, ToolReference, TranscriptContext, UserMessage};
use serde_json::json;

fn tool(name: &str, description: &str) -> Tool {
    Tool {
        name: name.into(),
        description: description.into(),
        parameters: json!({"type": "object", "properties": {}}).into(),
        constrained_sampling: None,
    }
}

fn system(content: &str) -> SystemMessage {
    SystemMessage { content: SystemContent::Text(content.into()), timestamp: 5, ..Default::default() }
}

fn user(text: &str) -> Message {
    Message::from(UserMessage { content: pi_types::UserMessageContent::Text(text.into()), timestamp: 0 })
}

fn names(tools: &[Tool]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

#[test]
fn leading_system_message_from_prompt_and_tools() {
    assert_eq!(create_initial_system_message(None, None), None);
    assert_eq!(create_initial_system_message(Some(""), Some(&[])), None);
    let lead = create_initial_system_message(Some("Be brief."), None).unwrap();
    assert_eq!(serde_json::to_value(&lead).unwrap(), json!({"role": "system", "content": "Be brief.", "timestamp": 0}));
    let lead = create_initial_system_message(None, Some(&[tool("a", "A")])).unwrap();
    assert_eq!(lead.content, SystemContent::Text(String::new()));
    assert_eq!(names(lead.tools_added.as_ref().unwrap()), ["a"]);
}

#[test]
fn normalize_context_folds_prompt_and_tools_into_a_leading_message() {
    let context =
        Context { system_prompt: Some("P".into()), messages: vec![user("hi")], tools: Some(vec![tool("a", "A")]) };
    let transcript = normalize_context(context);
    assert_eq!(transcript.messages().len(), 2);
    assert!(matches!(&transcript.messages()[0], Message::System(s) if s.tools_added.is_some()));
    let bare = normalize_context(Context { messages: vec![user("hi")], ..Default::default() });
    assert_eq!(bare.messages().len(), 1);
}

#[test]
fn replay_applies_removals_then_additions_in_order() {
    let first = SystemMessage { tools_added: Some(vec![tool("a", "A"), tool("b", "B")]), ..system("") };
    let second = SystemMessage {
        tools_removed: Some(vec![ToolReference { name: "a".into() }]),
        tools_added: Some(vec![tool("c", "C"), tool("a", "A2")]),
        ..system("")
    };
    let messages = vec![Message::from(first), user("x"), Message::from(second)];
    let tools = current_tools(&messages);
    assert_eq!(names(&tools), ["b", "c", "a"], "a removed then re-added moves to the end");
    assert_eq!(tools[2].description, "A2");
}

#[test]
fn replay_joins_contents_and_patches_sections_by_name() {
    let mut lead = system("Base");
    lead.sections = Some(Box::new(
        [("rules".to_owned(), Some("R1".to_owned())), ("style".to_owned(), Some("S1".to_owned()))].into(),
    ));
    let mut later = system("More");
    later.sections = Some(Box::new([("rules".to_owned(), None), ("extra".to_owned(), Some("E".to_owned()))].into()));
    let messages = vec![Message::from(lead), user("x"), Message::from(later)];
    let replayed = current_system_message(&messages).unwrap();
    assert_eq!(replayed.content, SystemContent::Text("Base\n\nMore".into()));
    let sections = replayed.sections.unwrap();
    assert_eq!(sections.keys().collect::<Vec<_>>(), ["style", "extra"]);
    assert_eq!(replayed.timestamp, 5, "the first system message's timestamp");
    assert_eq!(current_system_prompt(&messages), "Base\n\nMore\n\nS1\n\nE");
    assert_eq!(current_system_message(&[user("x")]), None);
}

#[test]
fn section_updates_render_with_their_names() {
    let mut update = system("Note");
    update.sections =
        Some(Box::new([("rules".to_owned(), None), ("style".to_owned(), Some("Terse".to_owned()))].into()));
    assert_eq!(
        render_system_message_update(&update),
        "Note\n\nRemoved system prompt section \"rules\".\n\nUpdated system prompt section \"style\":\n\nTerse"
    );
}

#[test]
fn a_changed_definition_is_a_removal_plus_an_addition() {
    let previous = vec![tool("a", "A"), tool("b", "B"), tool("gone", "G")];
    let current = vec![tool("b", "B2"), tool("a", "A"), tool("new", "N")];
    let changes = tool_state_changes(&previous, &current);
    assert_eq!(names(&changes.tools_added), ["b", "new"]);
    assert_eq!(changes.tools_removed.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["b", "gone"]);
    assert!(tool_state_changes(&current, &current).is_empty());
}

#[test]
fn declaration_equality_is_textual_so_key_order_matters() {
    let mut left = tool("a", "A");
    let mut right = tool("a", "A");
    left.parameters = json!({"type": "object", "properties": {}}).into();
    right.parameters = json!({"properties": {}, "type": "object"}).into();
    assert!(!declarations_equal(&left, &right));
    right.parameters = left.parameters.clone();
    assert!(declarations_equal(&left, &right));
}

#[test]
fn collapsing_puts_the_replayed_message_first_and_drops_the_rest() {
    let messages = vec![
        Message::from(SystemMessage { tools_added: Some(vec![tool("a", "A")]), ..system("Base") }),
        user("one"),
        Message::from(SystemMessage { tools_added: Some(vec![tool("b", "B")]), ..system("Later") }),
        user("two"),
    ];
    let collapsed = collapse_system_messages(TranscriptContext::from_messages(messages.clone()));
    assert_eq!(collapsed.messages().len(), 3);
    let Message::System(head) = &collapsed.messages()[0] else { panic!("no head") };
    assert_eq!(head.content, SystemContent::Text("Base\n\nLater".into()));
    assert_eq!(names(head.tools_added.as_ref().unwrap()), ["a", "b"]);
    let kept = resolve_transcript(TranscriptContext::from_messages(messages.clone()), true);
    assert_eq!(kept.messages().len(), 4);
}

#[test]
fn tool_declarations_split_by_transport_capability() {
    let additive = vec![
        Message::from(SystemMessage { tools_added: Some(vec![tool("a", "A")]), ..system("P") }),
        user("x"),
        Message::from(SystemMessage { tools_added: Some(vec![tool("b", "B")]), ..system("") }),
    ];
    let none = resolve_transcript_tools(&additive, TranscriptToolSupport::None);
    assert_eq!((names(&none.request_tools), none.folded_system_messages), (vec!["a", "b"], 2));
    let changes = resolve_transcript_tools(&additive, TranscriptToolSupport::Changes);
    assert_eq!((changes.request_tools.len(), changes.folded_system_messages), (0, 0));
    let additions = resolve_transcript_tools(&additive, TranscriptToolSupport::Additions);
    assert_eq!((names(&additions.request_tools), additions.folded_system_messages), (vec!["a"], 1));
    assert!(!has_non_additive_tool_changes(&additive));

    let mut with_removal = additive.clone();
    with_removal.push(Message::from(SystemMessage {
        tools_removed: Some(vec![ToolReference { name: "a".into() }]),
        ..system("")
    }));
    with_removal.push(Message::from(SystemMessage { tools_added: Some(vec![tool("c", "C")]), ..system("") }));
    assert!(has_non_additive_tool_changes(&with_removal));
    let additions = resolve_transcript_tools(&with_removal, TranscriptToolSupport::Additions);
    assert_eq!(additions.folded_system_messages, 3, "everything up to the removal is folded");
    assert_eq!(names(&additions.request_tools), ["b"]);
}

/// A tool list that names a tool twice: each entry is compared with the previous state on its
/// own, removals are judged against the last definition of a name (as the reference does).
#[test]
fn tool_changes_with_a_name_listed_twice() {
    let v1 = Tool { name: "lookup".into(), description: "v1".into(), ..Default::default() };
    let v2 = Tool { name: "lookup".into(), description: "v2".into(), ..Default::default() };
    let changes = pi_types::transcript::tool_state_changes(std::slice::from_ref(&v1), &[v1.clone(), v2]);
    assert_eq!(changes.tools_added.iter().map(|t| t.description.as_str()).collect::<Vec<_>>(), ["v2"]);
    assert_eq!(changes.tools_removed.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["lookup"]);
}
