//! Provider messages converted from a transcript, kept from one run to the next.
//!
//! # Protocol
//! With the default `convert_to_llm` and no `transform_context`, a run converts only the
//! messages added since its last request. A [`TranscriptCache`] carries that conversion
//! across runs of one growing transcript (the Agent keeps one), so a new prompt converts its
//! new messages only, not the history. A run takes the conversion out of the cache when it
//! starts and puts it back when it ends (also when it fails or is dropped): the cache never
//! shares it while the run appends, so nothing is copied.
//!
//! The cache is valid only for transcripts that begin with the messages the previous run
//! had converted. The owner starts a new cache whenever it replaces the transcript (the
//! Agent does on `set_messages` and `reset`); a run whose context is replaced by a hook stops
//! using it. A run also drops a conversion that covers more messages than its context has.

use std::sync::{Arc, Mutex, MutexGuard};

use pi_types::Message;

/// The converted prefix of a transcript: provider messages and how many transcript entries
/// (custom messages included) they came from.
#[derive(Clone, Debug, Default)]
pub(crate) struct Converted {
    pub(crate) messages: Arc<Vec<Message>>,
    pub(crate) sources: usize,
}

/// Provider messages converted from a growing transcript, reused by the next run (see the
/// module docs for the contract). Clones share one cache.
#[derive(Clone, Default)]
pub struct TranscriptCache {
    slot: Arc<Mutex<Option<Converted>>>,
}

impl std::fmt::Debug for TranscriptCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sources = self.slot().as_ref().map_or(0, |c| c.sources);
        f.debug_struct("TranscriptCache").field("converted", &sources).finish()
    }
}

impl TranscriptCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many transcript entries the stored conversion covers (0 while a run holds it).
    pub fn converted(&self) -> usize {
        self.slot().as_ref().map_or(0, |c| c.sources)
    }

    fn slot(&self) -> MutexGuard<'_, Option<Converted>> {
        // Plain data: a panic elsewhere cannot leave it half-written.
        self.slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn take(&self) -> Option<Converted> {
        self.slot().take()
    }

    pub(crate) fn put(&self, converted: Converted) {
        *self.slot() = Some(converted);
    }
}
