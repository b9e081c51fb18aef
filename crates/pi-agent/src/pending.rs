//! The ids of the tool calls that are executing, as a set in start order.

use std::collections::{BTreeMap, HashMap};

use serde::{Serialize, Serializer};

/// Ids of the tool calls between `tool_execution_start` and `tool_execution_end`, in start
/// order (the reference's `pendingToolCalls` set).
///
/// Adding and removing an id cost O(log n), so a response with thousands of parallel calls
/// stays linear; iterating yields the ids in the order their calls started.
#[derive(Clone, Default)]
pub struct PendingToolCalls {
    /// Start sequence number → id; iterating gives start order.
    by_start: BTreeMap<u64, String>,
    /// Id → its start sequence number.
    start_of: HashMap<String, u64>,
    next: u64,
}

impl PendingToolCalls {
    /// Whether no tool call is executing.
    pub fn is_empty(&self) -> bool {
        self.by_start.is_empty()
    }

    /// How many tool calls are executing.
    pub fn len(&self) -> usize {
        self.by_start.len()
    }

    /// Whether the call with this id is executing.
    pub fn contains(&self, id: &str) -> bool {
        self.start_of.contains_key(id)
    }

    /// The ids in the order their calls started.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.by_start.values().map(String::as_str)
    }

    /// Add an id at the end; `false` (and no change) if it is already there.
    pub(crate) fn insert(&mut self, id: &str) -> bool {
        if self.contains(id) {
            return false;
        }
        let start = self.next;
        self.next = self.next.wrapping_add(1);
        self.by_start.insert(start, id.to_owned());
        self.start_of.insert(id.to_owned(), start);
        true
    }

    /// Remove an id; `false` if it was not there.
    pub(crate) fn remove(&mut self, id: &str) -> bool {
        let Some(start) = self.start_of.remove(id) else { return false };
        let removed = self.by_start.remove(&start).is_some();
        if self.start_of.is_empty() {
            // Idle between batches: an agent that waits keeps no table around (an emptied
            // `BTreeMap` keeps its root node, an emptied `HashMap` its table).
            *self = Self { next: self.next, ..Self::default() };
        }
        removed
    }
}

impl std::fmt::Debug for PendingToolCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for PendingToolCalls {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for PendingToolCalls {}

/// A JSON array of the ids in start order, as the reference's state dump shows the set.
impl Serialize for PendingToolCalls {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_start_order_across_removals_and_ignores_repeats() {
        let mut pending = PendingToolCalls::default();
        for id in ["a", "b", "c", "d"] {
            assert!(pending.insert(id));
        }
        assert!(!pending.insert("b"));
        assert!(pending.remove("b"));
        assert!(!pending.remove("b"));
        assert!(pending.insert("b"));
        assert_eq!(pending.iter().collect::<Vec<_>>(), ["a", "c", "d", "b"]);
        assert_eq!(serde_json::to_string(&pending).ok().as_deref(), Some(r#"["a","c","d","b"]"#));
        assert_eq!(format!("{pending:?}"), r#"["a", "c", "d", "b"]"#);
        assert!(pending.contains("c") && !pending.contains("x"));
        assert_eq!(pending.len(), 4);
    }
}
