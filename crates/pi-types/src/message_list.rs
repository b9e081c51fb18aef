//! A transcript of agent messages shared structurally between its holders.
//!
//! An agent and each of its runs hold the same conversation and both append to it: the run
//! its context, the agent its observable state. With a plain `Vec` every prompt would copy
//! the whole history into the run (one reference-count increment per message, and as many
//! decrements when the run ends), so a long conversation would pay O(history) per prompt.
//! [`MessageList`] is a persistent vector (an RRB tree, `imbl::Vector`): a clone shares every
//! node, a push copies at most the one chunk it writes to, so a prompt costs O(new messages).
//!
//! The list also keeps its system messages apart, in order, because the transcript rules
//! (tool declarations, the current system prompt) replay only those: a replay costs the
//! system messages, not the history.

use std::fmt;
use std::sync::Arc;

use imbl::Vector;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::agent_message::AgentMessage;
use crate::message::SystemMessage;

/// A transcript of [`AgentMessage`]s: O(1) to clone, O(1) amortized to append.
///
/// ```
/// use pi_types::{AgentMessage, MessageList, UserMessage};
/// let mut history: MessageList = vec![AgentMessage::from("Be brief.")].into();
/// let snapshot = history.clone(); // shares every message; nothing is copied
/// history.push(UserMessage::text("Hi").into());
/// assert_eq!((snapshot.len(), history.len()), (1, 2));
/// assert_eq!(history.last().map(AgentMessage::role), Some("user"));
/// ```
#[derive(Clone, Default)]
pub struct MessageList {
    all: Vector<AgentMessage>,
    /// The system messages among `all`, in order.
    systems: Vector<Arc<SystemMessage>>,
}

impl MessageList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.all.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// Append a message.
    pub fn push(&mut self, message: AgentMessage) {
        if let AgentMessage::System(system) = &message {
            self.systems.push_back(Arc::clone(system));
        }
        self.all.push_back(message);
    }

    /// The message at `index`.
    pub fn get(&self, index: usize) -> Option<&AgentMessage> {
        self.all.get(index)
    }

    /// The first message.
    pub fn first(&self) -> Option<&AgentMessage> {
        self.all.front()
    }

    /// The last message.
    pub fn last(&self) -> Option<&AgentMessage> {
        self.all.back()
    }

    /// The messages in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(self.all.iter())
    }

    /// The messages from `start` on (none when `start` is past the end), found in O(log n).
    pub fn iter_from(&self, start: usize) -> impl DoubleEndedIterator<Item = &AgentMessage> + '_ {
        let start = start.min(self.all.len());
        self.all.focus().narrow(start..).into_iter()
    }

    /// The system messages in order, without walking the rest of the transcript.
    pub fn systems(&self) -> impl DoubleEndedIterator<Item = &SystemMessage> + ExactSizeIterator + '_ {
        self.systems.iter().map(|system| &**system)
    }

    /// Keep the first `len` messages.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.all.len() {
            return;
        }
        self.all.truncate(len);
        let systems = self.all.iter().filter(|m| matches!(m, AgentMessage::System(_))).count();
        self.systems.truncate(systems);
    }

    /// Remove every message.
    pub fn clear(&mut self) {
        self.all.clear();
        self.systems.clear();
    }

    /// The messages as a `Vec` (pointer copies: each message is shared, not cloned).
    pub fn to_vec(&self) -> Vec<AgentMessage> {
        self.all.iter().cloned().collect()
    }

    /// Whether both lists hold the same messages (by value).
    pub fn same_messages(&self, other: &[AgentMessage]) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == b)
    }
}

impl PartialEq for MessageList {
    fn eq(&self, other: &Self) -> bool {
        self.all == other.all
    }
}

impl fmt::Debug for MessageList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.all.iter()).finish()
    }
}

impl From<Vec<AgentMessage>> for MessageList {
    fn from(messages: Vec<AgentMessage>) -> Self {
        messages.into_iter().collect()
    }
}

impl From<&[AgentMessage]> for MessageList {
    fn from(messages: &[AgentMessage]) -> Self {
        messages.iter().cloned().collect()
    }
}

impl From<MessageList> for Vec<AgentMessage> {
    fn from(list: MessageList) -> Self {
        list.all.into_iter().collect()
    }
}

impl FromIterator<AgentMessage> for MessageList {
    fn from_iter<I: IntoIterator<Item = AgentMessage>>(messages: I) -> Self {
        let mut list = Self::new();
        list.extend(messages);
        list
    }
}

impl Extend<AgentMessage> for MessageList {
    fn extend<I: IntoIterator<Item = AgentMessage>>(&mut self, messages: I) {
        for message in messages {
            self.push(message);
        }
    }
}

type Pointer = imbl::shared_ptr::DefaultSharedPtr;

/// The messages of a [`MessageList`], by reference.
pub struct Iter<'a>(imbl::vector::Iter<'a, AgentMessage, Pointer>);

impl<'a> Iterator for Iter<'a> {
    type Item = &'a AgentMessage;

    fn next(&mut self) -> Option<&'a AgentMessage> {
        self.0.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back()
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// The messages of a [`MessageList`], by value.
pub struct IntoIter(imbl::vector::ConsumingIter<AgentMessage, Pointer>);

impl Iterator for IntoIter {
    type Item = AgentMessage;

    fn next(&mut self) -> Option<AgentMessage> {
        self.0.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for IntoIter {
    fn next_back(&mut self) -> Option<AgentMessage> {
        self.0.next_back()
    }
}

impl ExactSizeIterator for IntoIter {}

impl<'a> IntoIterator for &'a MessageList {
    type Item = &'a AgentMessage;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl IntoIterator for MessageList {
    type Item = AgentMessage;
    type IntoIter = IntoIter;

    fn into_iter(self) -> IntoIter {
        IntoIter(self.all.into_iter())
    }
}

impl std::ops::Index<usize> for MessageList {
    type Output = AgentMessage;

    /// Panics when `index` is out of bounds, like a slice.
    fn index(&self, index: usize) -> &AgentMessage {
        &self.all[index]
    }
}

impl Serialize for MessageList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.all.iter())
    }
}

impl<'de> Deserialize<'de> for MessageList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<AgentMessage>::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SystemContent, UserMessage};

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
}
