//! Why a run failed instead of ending normally.

/// A run that could not complete. Messages equal the reference's thrown errors.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoopError {
    /// `continue` on an empty transcript.
    #[error("Cannot continue: no messages in context")]
    NoMessages,
    /// `continue` when the last message is the model's.
    #[error("Cannot continue from message role: assistant")]
    ContinueFromAssistant,
    /// A hook outside tool handling failed (its error text).
    #[error("{0}")]
    Hook(String),
    /// The event sink failed (its error text).
    #[error("{0}")]
    Sink(String),
}
