//! Per-session state the adapters keep between requests, and how to free it when a session ends
//! (pi-ai's `session-resources.js`).
//!
//! Some recoveries remember a session (`StreamOptions::session_id`) across requests: the strict
//! tool limits a session ran into (`api::strict_tool_limits`), Codex's open WebSockets and its
//! fallbacks to SSE (`api::openai::codex`), the reply an Anthropic message thread continues
//! after (`api::anthropic`). Each such table is capped, so a
//! host that never cleans up still uses bounded memory; a host that knows when a session ends
//! calls [`cleanup_session_resources`] with its id (or `None` for every session) to free it at
//! once. Hosts may register cleanups of their own with [`register_session_resource_cleanup`].

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use pi_types::BoxError;

use crate::registry::ProviderError;

/// A cleanup: called with the session that ended, or `None` for every session.
pub type SessionCleanup = Arc<dyn Fn(Option<&str>) -> Result<(), BoxError> + Send + Sync>;

struct Registered {
    next: u64,
    cleanups: BTreeMap<u64, SessionCleanup>,
}

static REGISTERED: Mutex<Registered> = Mutex::new(Registered { next: 0, cleanups: BTreeMap::new() });

/// A registered cleanup; [`CleanupRegistration::unregister`] removes it (dropping it keeps it).
#[derive(Debug)]
#[must_use = "keep the registration to unregister the cleanup later"]
pub struct CleanupRegistration(u64);

impl CleanupRegistration {
    /// Removes the cleanup: later [`cleanup_session_resources`] calls no longer run it.
    pub fn unregister(self) {
        REGISTERED.lock().unwrap_or_else(PoisonError::into_inner).cleanups.remove(&self.0);
    }
}

/// Registers a cleanup that [`cleanup_session_resources`] runs after the built-in ones, in
/// registration order.
pub fn register_session_resource_cleanup(cleanup: SessionCleanup) -> CleanupRegistration {
    let mut registered = REGISTERED.lock().unwrap_or_else(PoisonError::into_inner);
    let id = registered.next;
    registered.next = registered.next.wrapping_add(1);
    registered.cleanups.insert(id, cleanup);
    CleanupRegistration(id)
}

/// Frees what the adapters keep for `session_id` (every session for `None`): the built-in
/// tables, then each registered cleanup. Every cleanup runs even when one fails.
///
/// # Errors
///
/// [`ProviderError::SessionCleanup`] with the text of each failed cleanup.
pub fn cleanup_session_resources(session_id: Option<&str>) -> Result<(), ProviderError> {
    #[cfg(feature = "http")]
    crate::api::strict_tool_limits::forget(session_id);
    #[cfg(feature = "http")]
    crate::api::anthropic::threads::forget(session_id);
    #[cfg(feature = "http")]
    crate::api::openai::codex::forget_sessions(session_id);
    let cleanups: Vec<SessionCleanup> =
        REGISTERED.lock().unwrap_or_else(PoisonError::into_inner).cleanups.values().cloned().collect();
    let errors: Vec<String> =
        cleanups.iter().filter_map(|cleanup| cleanup(session_id).err()).map(|e| e.to_string()).collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ProviderError::SessionCleanup(errors))
    }
}

/// A per-session table holding at most `cap` sessions; past the cap the least recently
/// written session is dropped (it then just starts afresh, as after a cleanup).
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) struct SessionTable<V> {
    cap: usize,
    clock: u64,
    entries: HashMap<String, (u64, V)>,
    order: BTreeMap<u64, String>,
}

#[cfg_attr(not(feature = "http"), allow(dead_code))]
impl<V> SessionTable<V> {
    pub(crate) fn new(cap: usize) -> Self {
        Self { cap, clock: 0, entries: HashMap::new(), order: BTreeMap::new() }
    }

    /// Sets a session's value, making it the most recently written.
    pub(crate) fn insert(&mut self, session: &str, value: V) {
        self.remove(session);
        self.clock = self.clock.wrapping_add(1);
        self.order.insert(self.clock, session.to_owned());
        self.entries.insert(session.to_owned(), (self.clock, value));
        while self.entries.len() > self.cap {
            let Some((_, oldest)) = self.order.pop_first() else { break };
            self.entries.remove(&oldest);
        }
    }

    pub(crate) fn get<Q: ?Sized + std::hash::Hash + Eq>(&self, session: &Q) -> Option<&V>
    where
        String: Borrow<Q>,
    {
        self.entries.get(session).map(|(_, value)| value)
    }

    pub(crate) fn remove(&mut self, session: &str) -> Option<V> {
        let (stamp, value) = self.entries.remove(session)?;
        self.order.remove(&stamp);
        Some(value)
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.order.clear();
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_table_drops_the_least_recently_written_session_past_its_cap() {
        let mut table = SessionTable::new(2);
        table.insert("a", 1);
        table.insert("b", 2);
        table.insert("a", 3);
        table.insert("c", 4);
        assert_eq!((table.get("a"), table.get("b"), table.get("c")), (Some(&3), None, Some(&4)));
        assert_eq!(table.len(), 2);
        assert_eq!(table.remove("a"), Some(3));
        table.clear();
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn registered_cleanups_run_until_unregistered_and_failures_are_collected() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let ok = register_session_resource_cleanup(Arc::new(move |session: Option<&str>| {
            sink.lock().unwrap().push(session.map(str::to_owned));
            Ok(())
        }));
        let failing = register_session_resource_cleanup(Arc::new(|_: Option<&str>| Err("cleanup failed: disk".into())));
        let error = cleanup_session_resources(Some("s-1")).unwrap_err();
        assert_eq!(error.to_string(), "Failed to cleanup session resources: cleanup failed: disk");
        failing.unregister();
        cleanup_session_resources(None).unwrap();
        ok.unregister();
        cleanup_session_resources(Some("s-2")).unwrap();
        assert_eq!(*seen.lock().unwrap(), vec![Some("s-1".to_owned()), None]);
    }
}
