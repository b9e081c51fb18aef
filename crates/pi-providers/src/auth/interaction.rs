//! What a sign-in asks of the user and tells them (the reference's `AuthInteraction`).
//!
//! Cancellation is Rust's: a flow that no longer needs an answer drops the prompt's future
//! (a `manual_code` prompt raced against the callback server is dropped when the callback
//! wins), and a caller cancels a whole sign-in by dropping its future.

use futures::future::BoxFuture;

use super::AuthError;

/// A question for the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthPrompt {
    /// Free text (an enterprise domain).
    Text {
        /// The question.
        message: String,
        /// An example answer.
        placeholder: Option<String>,
    },
    /// A secret (an API key): the answer should not be echoed.
    Secret {
        /// The question.
        message: String,
    },
    /// One of `options` (`(id, label)`); the answer is the id.
    Select {
        /// The question.
        message: String,
        /// `(id, label)` pairs.
        options: Vec<(String, String)>,
    },
    /// A pasted authorization code or redirect URL.
    ManualCode {
        /// The question.
        message: String,
        /// An example answer.
        placeholder: Option<String>,
    },
}

/// Something to show the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthEvent {
    /// A message.
    Info(String),
    /// A page to open in a browser.
    AuthUrl {
        /// The page.
        url: String,
        /// What to do there.
        instructions: Option<String>,
    },
    /// A device code to enter at `verification_uri`.
    DeviceCode {
        /// The code.
        user_code: String,
        /// Where to enter it.
        verification_uri: String,
        /// The polling interval, seconds.
        interval_seconds: Option<u64>,
        /// How long the code is valid, seconds.
        expires_in_seconds: Option<u64>,
    },
    /// Progress of the flow.
    Progress(String),
}

/// The user's side of a sign-in.
pub trait AuthInteraction: Send + Sync {
    /// Ask a question; the answer, or an error when the user declines.
    fn prompt<'a>(&'a self, prompt: AuthPrompt) -> BoxFuture<'a, Result<String, AuthError>>;

    /// Show something.
    fn notify(&self, event: AuthEvent);
}
