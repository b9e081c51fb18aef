//! A transcript of agent messages shared structurally between its holders.
//!
//! An agent and each of its runs hold the same conversation and both append to it: the run
//! its context, the agent its observable state. With a plain `Vec` every prompt would copy
//! the whole history into the run (one reference-count increment per message, and as many
//! decrements when the run ends), so a long conversation would pay O(history) per prompt.
//! [`MessageList`] is a persistent vector (an RRB tree, `imbl::Vector`): a clone shares every
//! node, a push copies at most the one chunk it writes to, so a prompt costs O(new messages).
//! Up to 32 messages it is one shared `Vec` instead, copied whole (a bounded copy) when a
//! holder appends to a shared one.
//!
//! A long list also keeps its system messages apart, in order, because the transcript rules
//! (tool declarations, the current system prompt) replay only those: a replay costs the
//! system messages, not the history. A short list (up to 32 messages, most agents' whole
//! conversation) finds them by looking through itself, which costs less than keeping a second
//! shared list beside every transcript.

use std::fmt;
use std::sync::Arc;

use imbl::Vector;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use pi_types::{AgentMessage, SystemMessage};

/// A transcript of [`AgentMessage`]s: O(1) to clone, O(1) amortized to append.
///
/// ```
/// use pi_loop::MessageList;
/// use pi_types::{AgentMessage, UserMessage};
/// let mut history: MessageList = vec![AgentMessage::from("Be brief.")].into();
/// let snapshot = history.clone(); // shares every message; nothing is copied
/// history.push(UserMessage::text("Hi").into());
/// assert_eq!((snapshot.len(), history.len()), (1, 2));
/// assert_eq!(history.last().map(AgentMessage::role), Some("user"));
/// ```
#[derive(Clone, Default)]
pub struct MessageList {
    all: Shared<AgentMessage>,
    /// The system messages among `all`, in order, once `all` is a tree (`None` while it is
    /// small: they are found by a scan then).
    systems: Option<Shared<Arc<SystemMessage>>>,
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
        self.all.len() == 0
    }

    /// Append a message.
    pub fn push(&mut self, message: AgentMessage) {
        if let (AgentMessage::System(system), Some(systems)) = (&message, &mut self.systems) {
            systems.push(Arc::clone(system));
        }
        self.all.push(message);
        if self.systems.is_none() && matches!(self.all, Shared::Large(_)) {
            let mut systems = Shared::default();
            for message in self.all.iter_from(0) {
                if let AgentMessage::System(system) = message {
                    systems.push(Arc::clone(system));
                }
            }
            self.systems = Some(systems);
        }
    }

    /// The message at `index`.
    pub fn get(&self, index: usize) -> Option<&AgentMessage> {
        self.all.get(index)
    }

    /// The first message.
    pub fn first(&self) -> Option<&AgentMessage> {
        self.all.get(0)
    }

    /// The last message.
    pub fn last(&self) -> Option<&AgentMessage> {
        self.all.len().checked_sub(1).and_then(|last| self.all.get(last))
    }

    /// The messages in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(self.all.iter_from(0))
    }

    /// The messages from `start` on (none when `start` is past the end), found in O(log n).
    pub fn iter_from(&self, start: usize) -> Iter<'_> {
        Iter(self.all.iter_from(start))
    }

    /// The system messages in order, without walking the rest of the transcript.
    pub fn systems(&self) -> impl DoubleEndedIterator<Item = &SystemMessage> + ExactSizeIterator + '_ {
        Systems(match &self.systems {
            Some(systems) => SystemsRepr::Index(systems.iter_from(0)),
            None => {
                let left = self.all.iter_from(0).filter(|m| matches!(m, AgentMessage::System(_))).count();
                SystemsRepr::Scan { messages: self.all.iter_from(0), left }
            }
        })
    }

    /// Keep the first `len` messages.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.all.len() {
            return;
        }
        self.all.truncate(len);
        if let Some(systems) = &mut self.systems {
            let kept = self.all.iter_from(0).filter(|m| matches!(m, AgentMessage::System(_))).count();
            systems.truncate(kept);
        }
    }

    /// Remove every message.
    pub fn clear(&mut self) {
        *self = Self::new();
    }

    /// The messages as a `Vec` (pointer copies: each message is shared, not cloned).
    pub fn to_vec(&self) -> Vec<AgentMessage> {
        self.iter().cloned().collect()
    }
}

/// Up to this many entries a list is one shared `Vec`, copied whole when a holder appends to
/// a shared one (a bounded copy); past it, a persistent vector. A persistent vector allocates
/// its leaves whole (64 entries), far more than a short conversation needs, and an agent's
/// transcript is usually short.
const SMALL: usize = 32;

type Pointer = imbl::shared_ptr::DefaultSharedPtr;

/// A sequence shared between clones: a small `Vec` behind an `Arc`, or an RRB tree.
#[derive(Clone)]
enum Shared<T: Clone> {
    Small(Arc<Vec<T>>),
    // Behind an `Arc`: inline, the tree's root would make every list (an agent's state, each
    // run's context) four times the size of the small case.
    Large(Arc<Vector<T>>),
}

impl<T: Clone> Default for Shared<T> {
    fn default() -> Self {
        Self::Small(Arc::default())
    }
}

impl<T: Clone> Shared<T> {
    fn len(&self) -> usize {
        match self {
            Self::Small(items) => items.len(),
            Self::Large(items) => items.len(),
        }
    }

    fn push(&mut self, item: T) {
        match self {
            Self::Small(items) if items.len() < SMALL => match Arc::get_mut(items) {
                Some(own) => own.push(item),
                None => {
                    // Shared with another holder (an agent and its run each append the same
                    // messages): the copy gets room for this one message and the next, not
                    // the doubling a push would give a copy of exactly the shared length.
                    let mut copy = Vec::with_capacity(items.len().saturating_add(2));
                    copy.extend(items.iter().cloned());
                    copy.push(item);
                    *items = Arc::new(copy);
                }
            },
            Self::Small(items) => {
                let mut large: Vector<T> = items.iter().cloned().collect();
                large.push_back(item);
                *self = Self::Large(Arc::new(large));
            }
            Self::Large(items) => Arc::make_mut(items).push_back(item),
        }
    }

    fn get(&self, index: usize) -> Option<&T> {
        match self {
            Self::Small(items) => items.get(index),
            Self::Large(items) => items.get(index),
        }
    }

    fn truncate(&mut self, len: usize) {
        match self {
            Self::Small(items) => Arc::make_mut(items).truncate(len),
            Self::Large(items) => Arc::make_mut(items).truncate(len),
        }
    }

    fn iter_from(&self, start: usize) -> SharedIter<'_, T> {
        match self {
            Self::Small(items) => SharedIter::Small(items.get(start..).unwrap_or_default().iter()),
            Self::Large(items) => {
                let start = start.min(items.len());
                SharedIter::Large(items.focus().narrow(start..).into_iter())
            }
        }
    }
}

enum SharedIter<'a, T: Clone> {
    Small(std::slice::Iter<'a, T>),
    Large(imbl::vector::Iter<'a, T, Pointer>),
}

impl<'a, T: Clone> Iterator for SharedIter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        match self {
            Self::Small(items) => items.next(),
            Self::Large(items) => items.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Self::Small(items) => items.size_hint(),
            Self::Large(items) => items.size_hint(),
        }
    }
}

impl<T: Clone> DoubleEndedIterator for SharedIter<'_, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Self::Small(items) => items.next_back(),
            Self::Large(items) => items.next_back(),
        }
    }
}

impl<T: Clone> ExactSizeIterator for SharedIter<'_, T> {}

/// The system messages of a [`MessageList`]: from its index, or by a scan of a short list
/// (which counted them first, so that the length is known).
struct Systems<'a>(SystemsRepr<'a>);

enum SystemsRepr<'a> {
    Index(SharedIter<'a, Arc<SystemMessage>>),
    Scan { messages: SharedIter<'a, AgentMessage>, left: usize },
}

impl<'a> Iterator for Systems<'a> {
    type Item = &'a SystemMessage;

    fn next(&mut self) -> Option<&'a SystemMessage> {
        match &mut self.0 {
            SystemsRepr::Index(systems) => systems.next().map(|system| &**system),
            SystemsRepr::Scan { messages, left } => {
                let found = messages.find_map(AgentMessage::as_system)?;
                *left = left.saturating_sub(1);
                Some(found)
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            SystemsRepr::Index(systems) => systems.size_hint(),
            SystemsRepr::Scan { left, .. } => (*left, Some(*left)),
        }
    }
}

impl DoubleEndedIterator for Systems<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            SystemsRepr::Index(systems) => systems.next_back().map(|system| &**system),
            SystemsRepr::Scan { messages, left } => {
                let found = messages.rev().find_map(AgentMessage::as_system)?;
                *left = left.saturating_sub(1);
                Some(found)
            }
        }
    }
}

impl ExactSizeIterator for Systems<'_> {}

/// The messages of a [`MessageList`], by reference.
pub struct Iter<'a>(SharedIter<'a, AgentMessage>);

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

impl PartialEq for MessageList {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl fmt::Debug for MessageList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
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
        list.into_iter().collect()
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

/// The messages of a [`MessageList`], by value.
pub struct IntoIter(IntoIterRepr);

enum IntoIterRepr {
    Small(std::vec::IntoIter<AgentMessage>),
    Large(imbl::vector::ConsumingIter<AgentMessage, Pointer>),
}

impl Iterator for IntoIter {
    type Item = AgentMessage;

    fn next(&mut self) -> Option<AgentMessage> {
        match &mut self.0 {
            IntoIterRepr::Small(items) => items.next(),
            IntoIterRepr::Large(items) => items.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            IntoIterRepr::Small(items) => items.size_hint(),
            IntoIterRepr::Large(items) => items.size_hint(),
        }
    }
}

impl DoubleEndedIterator for IntoIter {
    fn next_back(&mut self) -> Option<AgentMessage> {
        match &mut self.0 {
            IntoIterRepr::Small(items) => items.next_back(),
            IntoIterRepr::Large(items) => items.next_back(),
        }
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
        IntoIter(match self.all {
            // Moved out when no other list shares it.
            Shared::Small(items) => {
                IntoIterRepr::Small(Arc::try_unwrap(items).unwrap_or_else(|shared| (*shared).clone()).into_iter())
            }
            Shared::Large(items) => IntoIterRepr::Large(Arc::unwrap_or_clone(items).into_iter()),
        })
    }
}

impl std::ops::Index<usize> for MessageList {
    type Output = AgentMessage;

    /// Panics when `index` is out of bounds, like a slice.
    fn index(&self, index: usize) -> &AgentMessage {
        match self.all.get(index) {
            Some(message) => message,
            None => panic!("index {index} out of bounds for a MessageList of {}", self.len()),
        }
    }
}

impl Serialize for MessageList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for MessageList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<AgentMessage>::deserialize(deserializer).map(Self::from)
    }
}
