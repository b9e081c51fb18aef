//! Why an agent call was refused or a run could not settle cleanly.

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
}
