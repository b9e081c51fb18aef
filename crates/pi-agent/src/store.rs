//! Where sessions are kept: the [`SessionStore`] seam, one method per operation.
//!
//! # Protocol
//! A store keeps named sessions. Each is a transcript (the reference's wire JSON, one entry
//! per message, in order), the agent's lifetime [`UsageTotal`], and a **version**: a number
//! the store changes with every write. A writer states the version it last saw
//! ([`SessionWrite::version`]); when the session moved on since (another worker wrote it), the
//! write changes nothing and fails with [`AgentError::SessionConflict`]. This is optimistic
//! concurrency: of two workers that resumed the same session and write at once, exactly one
//! wins; the other learns it before its run goes on over a stale transcript.
//!
//! Each write is atomic: after a crash (even `kill -9` mid-write) a session holds either the
//! write or nothing of it, at worst a torn last file line, which [`FileStore`] drops on load.
//!
//! [`FileStore`] (one JSONL file per session) is the default; `pi-rs-store` adds SQLite and
//! PostgreSQL. [`Session`](crate::Session) drives a store from an agent's events.

use futures::future::BoxFuture;
use pi_loop::MessageList;
use pi_types::AgentMessage;

use crate::error::AgentError;
use crate::usage::UsageTotal;

#[allow(unused_imports)] // for the docs' links
use crate::file_store::FileStore;

/// A place sessions are kept (files, a database). `Send + Sync`: one store serves many agents.
pub trait SessionStore: Send + Sync {
    /// The session `id` as saved; an empty session at version 0 when there is none.
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<StoredSession, AgentError>>;

    /// Add `write.messages[write.from..]` after the saved messages (there are `write.from` of
    /// them) and save `write.usage`; returns the new version. Fails with
    /// [`AgentError::SessionConflict`], changing nothing, unless the session is at
    /// `write.version`.
    fn append<'a>(&'a self, id: &'a str, write: SessionWrite<'a>) -> BoxFuture<'a, Result<u64, AgentError>>;

    /// Replace the saved transcript with all of `write.messages` (`write.from` is 0) and save
    /// `write.usage`; returns the new version. The same version rule as [`Self::append`].
    fn rewrite<'a>(&'a self, id: &'a str, write: SessionWrite<'a>) -> BoxFuture<'a, Result<u64, AgentError>>;

    /// Every saved session, most recently updated first.
    fn list(&self) -> BoxFuture<'_, Result<Vec<SessionSummary>, AgentError>>;

    /// Remove the session `id` (nothing happens when there is none).
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), AgentError>>;
}

/// What a store holds for one session ([`SessionStore::load`]).
#[derive(Clone, Debug, Default)]
pub struct StoredSession {
    /// The transcript, in order.
    pub messages: Vec<AgentMessage>,
    /// The agent's lifetime totals when the session was last written.
    pub usage: UsageTotal,
    /// The version to state in the next write (0: no session yet).
    pub version: u64,
    /// What was repaired while loading (a torn last line dropped).
    pub warnings: Vec<String>,
}

/// One write to a store ([`SessionStore::append`], [`SessionStore::rewrite`]).
#[derive(Clone, Copy, Debug)]
pub struct SessionWrite<'a> {
    /// The version the writer last saw; the write fails unless the session is still at it.
    pub version: u64,
    /// The agent's transcript.
    pub messages: &'a MessageList,
    /// Where the messages to write start in `messages` (how many are saved already).
    pub from: usize,
    /// The agent's lifetime totals after these messages.
    pub usage: &'a UsageTotal,
}

/// One line of [`SessionStore::list`].
#[derive(Clone, Debug, PartialEq)]
pub struct SessionSummary {
    /// The session's id (for [`FileStore`], its file name).
    pub id: String,
    /// When it was last written, in milliseconds since the Unix epoch.
    pub updated_ms: u64,
    /// How many messages it holds.
    pub messages: u64,
    /// Its lifetime cost in dollars (`usage.cost.total`).
    pub cost: f64,
}
