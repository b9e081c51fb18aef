//! `MessageList`: systems kept apart, truncation, iteration from an index.

use pi_loop::MessageList;

/// How long a list stays a plain shared `Vec` (`message_list.rs`), for the lengths around it.
const SMALL: usize = 32;
use pi_types::{AgentMessage, SystemContent, SystemMessage, UserMessage};

fn system(text: &str) -> AgentMessage {
    SystemMessage { content: SystemContent::Text(text.into()), ..Default::default() }.into()
}

#[test]
fn systems_follow_pushes_and_truncation() {
    let mut list = MessageList::new();
    list.push(system("a"));
    list.push(UserMessage::text("u").into());
    list.push(system("b"));
    let texts: Vec<String> = list.systems().map(|s| s.content.to_text()).collect();
    assert_eq!(texts, ["a", "b"]);
    list.truncate(2);
    assert_eq!(list.systems().count(), 1);
    assert_eq!(list.len(), 2);
}

#[test]
fn iter_from_skips_and_clamps() {
    let list: MessageList = (0..100).map(|i| AgentMessage::from(format!("m{i}"))).collect();
    assert_eq!(list.iter_from(98).count(), 2);
    assert_eq!(list.iter_from(500).count(), 0);
    assert!(list.iter_from(0).eq(list.iter()));
}

#[test]
fn small_and_large_lists_behave_alike() {
    for len in [0, 1, SMALL - 1, SMALL, SMALL + 1, 200] {
        let messages: Vec<AgentMessage> = (0..len).map(|i| AgentMessage::from(format!("m{i}"))).collect();
        let list = MessageList::from(messages.clone());
        assert!(list.iter().eq(messages.iter()), "{len}");
        assert_eq!(list.iter().rev().count(), len);
        assert_eq!(list.iter_from(len / 2).count(), len - len / 2);
        assert_eq!(list.last(), messages.last());
        assert_eq!(list.get(len), None);
        let mut shared = list.clone();
        shared.push(system("s"));
        assert_eq!((list.len(), shared.len(), shared.systems().count()), (len, len + 1, 1));
        assert_eq!(Vec::from(shared.clone()).len(), len + 1);
        shared.push(UserMessage::text("u").into());
        shared.push(system("t"));
        let texts: Vec<String> = shared.systems().rev().map(|s| s.content.to_text()).collect();
        assert_eq!((shared.systems().len(), texts), (2, vec!["t".to_owned(), "s".to_owned()]), "{len}");
        shared.truncate(len);
        assert_eq!(shared, list);
        assert_eq!(shared.systems().count(), 0);
    }
}

#[test]
fn a_clone_shares_and_diverges() {
    let base: MessageList = (0..1000).map(|i| AgentMessage::from(format!("m{i}"))).collect();
    let mut run = base.clone();
    run.push(UserMessage::text("new").into());
    assert_eq!(base.len(), 1000);
    assert_eq!(run.len(), 1001);
    assert!(run.iter().take(1000).eq(base.iter()));
    let json = serde_json::to_value(&run).unwrap_or_default();
    let back: MessageList = serde_json::from_value(json).unwrap_or_default();
    assert_eq!(back, run);
}
