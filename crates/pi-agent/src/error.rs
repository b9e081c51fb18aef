//! Why an agent call was refused, a run could not settle cleanly, or a session file failed.

/// An error of an [`crate::Agent`] call. Messages equal the reference's thrown errors.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// `prompt` while a run is active.
    #[error(
        "Agent is already processing a prompt. Use steer() or followUp() to queue messages, or wait for completion."
    )]
    AlreadyProcessingPrompt,
    /// `continue` while a run is active.
    #[error("Agent is already processing. Wait for completion before continuing.")]
    AlreadyProcessingContinue,
    /// `reset` while a run is active.
    #[error("Agent is already processing. Wait for completion before resetting.")]
    AlreadyProcessingReset,
    /// `continue` on an empty or system-only transcript.
    #[error("No messages to continue from")]
    NoMessagesToContinue,
    /// `continue` from an assistant message with both queues empty.
    #[error("Cannot continue from message role: assistant")]
    ContinueFromAssistant,
    /// A listener failed (or panicked) again while the run's failure was being reported.
    #[error("{0}")]
    Listener(String),
    /// `prompt`/`continue` called outside a Tokio runtime: the run needs one to be spawned on.
    #[error("Agent runs need a Tokio runtime (call prompt/continue from within one)")]
    NoRuntime,
    /// Every handle of the agent was dropped while the run was active, which ended it.
    #[error("The agent was dropped before the run settled")]
    AgentDropped,
    /// A session could not be read or written.
    #[error("session {path}: {reason}")]
    SessionIo {
        /// The file, or the store and session.
        path: String,
        /// What failed.
        reason: String,
    },
    /// A line of a session file is not a message (damage, not a torn last line).
    #[error("session {path}, line {line}: not a message: {reason}")]
    SessionCorrupt {
        /// The file.
        path: String,
        /// The line, from 1.
        line: usize,
        /// Why it does not parse.
        reason: String,
    },
    /// Another writer changed the session since this one loaded it (optimistic concurrency:
    /// the write was refused and changed nothing). Load the session again to go on.
    #[error("session {session} was changed by another writer since it was loaded; load it again to continue")]
    SessionConflict {
        /// The session (its file, or its store and id).
        session: String,
    },
    /// A saved session is resumed with options whose system prompt differs from the saved one.
    #[error("the session was saved with another system prompt; resume it without one, or start a new session")]
    SystemPromptChanged {
        /// The saved transcript's system prompt.
        saved: String,
        /// The options' system prompt.
        given: String,
    },
}
