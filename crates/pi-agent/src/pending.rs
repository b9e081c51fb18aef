//! The ids of the tool calls that are executing, as a set in start order.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use pi_types::CompactString;

use serde::{Serialize, Serializer};

/// Below this many slots, looking an id up scans them: cheaper than a hash table, and an agent
/// with one call in flight keeps one small vector instead of two tables.
const SCANNED: usize = 16;

/// Ids of the tool calls between `tool_execution_start` and `tool_execution_end`, in start
/// order (the reference's `pendingToolCalls` set).
///
/// Adding and removing an id cost amortized O(1), so a response with thousands of parallel
/// calls stays linear; iterating yields the ids in the order their calls started.
#[derive(Clone, Default)]
pub struct PendingToolCalls {
    /// In start order; `None` where a call ended (compacted once they are the majority). Ids
    /// are `CompactString`s: a provider's call id is usually short enough to need no allocation.
    slots: Vec<Option<CompactString>>,
    /// Id → its slot, while there are more than [`SCANNED`] slots (`None` otherwise): boxed,
    /// so the set every agent keeps is small while it needs no table.
    #[allow(clippy::box_collection)]
    index: Option<Box<HashMap<CompactString, usize>>>,
    /// How many slots hold an id.
    len: usize,
}

impl PendingToolCalls {
    /// The empty set, shared: an agent that has no call in flight holds no set of its own (the
    /// first call copies it on write).
    pub(crate) fn shared_empty() -> Arc<Self> {
        static EMPTY: OnceLock<Arc<PendingToolCalls>> = OnceLock::new();
        Arc::clone(EMPTY.get_or_init(Arc::default))
    }

    /// Whether no tool call is executing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many tool calls are executing.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the call with this id is executing.
    pub fn contains(&self, id: &str) -> bool {
        self.slot_of(id).is_some()
    }

    /// The ids in the order their calls started.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &str> {
        self.slots.iter().flatten().map(CompactString::as_str)
    }

    /// Add an id at the end; `false` (and no change) if it is already there.
    pub(crate) fn insert(&mut self, id: &str) -> bool {
        if self.contains(id) {
            return false;
        }
        if self.slots.capacity() == 0 {
            // Most batches are one call: room for just it (growth doubles from there).
            self.slots.reserve_exact(1);
        }
        self.slots.push(Some(id.into()));
        self.len += 1;
        let slot = self.slots.len() - 1;
        match &mut self.index {
            Some(index) => {
                index.insert(id.into(), slot);
            }
            None if self.slots.len() > SCANNED => self.reindex(),
            None => {}
        }
        true
    }

    /// Remove an id; `false` if it was not there.
    pub(crate) fn remove(&mut self, id: &str) -> bool {
        let Some(slot) = self.slot_of(id) else { return false };
        if let Some(entry) = self.slots.get_mut(slot) {
            *entry = None;
        }
        if let Some(index) = &mut self.index {
            index.remove(id);
        }
        self.len = self.len.saturating_sub(1);
        if self.len == 0 {
            // Idle between batches: an agent that waits keeps no table around.
            *self = Self::default();
        } else if self.slots.len() > 2 * self.len + SCANNED {
            self.slots.retain(Option::is_some);
            self.index = None;
            if self.slots.len() > SCANNED {
                self.reindex();
            }
        }
        true
    }

    fn slot_of(&self, id: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(id).copied(),
            None => self.slots.iter().position(|slot| slot.as_deref() == Some(id)),
        }
    }

    fn reindex(&mut self) {
        let index = self.slots.iter().enumerate().filter_map(|(slot, id)| Some((id.clone()?, slot))).collect();
        self.index = Some(Box::new(index));
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

    #[test]
    fn a_large_set_keeps_start_order_through_compaction() {
        let mut pending = PendingToolCalls::default();
        let ids: Vec<String> = (0..200).map(|i| format!("call_{i}")).collect();
        for id in &ids {
            assert!(pending.insert(id));
        }
        // End every call but each seventh, in reverse, then add one more.
        for id in ids.iter().enumerate().rev().filter(|(i, _)| i % 7 != 0).map(|(_, id)| id) {
            assert!(pending.remove(id));
            assert!(!pending.contains(id));
        }
        assert!(pending.insert("late"));
        let expected: Vec<&str> =
            ids.iter().enumerate().filter(|(i, _)| i % 7 == 0).map(|(_, id)| id.as_str()).chain(["late"]).collect();
        assert_eq!(pending.iter().collect::<Vec<_>>(), expected);
        assert_eq!(pending.len(), expected.len());
        assert!(expected.iter().all(|id| pending.contains(id)));
        for id in expected {
            assert!(pending.remove(id));
        }
        assert!(pending.is_empty() && pending.slots.capacity() == 0 && pending.index.is_none());
    }
}
