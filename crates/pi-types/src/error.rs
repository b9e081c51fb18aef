//! Errors of this crate and the error convention of hooks and tools.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The error a hook or tool returns: anything that displays. Its `to_string()` is the
/// message the reference would have thrown.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Errors of `pi-types`.
#[derive(Debug, thiserror::Error)]
pub enum TypesError {
    /// A tool's parameter schema could not be compiled.
    #[error("invalid parameter schema for tool `{tool}`: {reason}")]
    InvalidToolSchema {
        /// The tool.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// A content index that names no block of the message being built.
    #[error("no content block {index}: the message has {count}")]
    NoSuchBlock {
        /// The index.
        index: usize,
        /// How many blocks the message has.
        count: usize,
    },
    /// A content index that names a block of another kind, or one that already ended.
    #[error("content block {index} is {found}, expected {expected}")]
    WrongBlock {
        /// The index.
        index: usize,
        /// What the call needed, e.g. `an open text block`.
        expected: String,
        /// What the block is, e.g. `an ended toolCall block`.
        found: String,
    },
    /// JSON that does not match the wire types.
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// The message of a caught panic payload: the `&str`/`String` it carried, else `"panic"`.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic".to_owned()
    }
}

/// Run a hook or tool future, turning `Err(e)` into `e.to_string()` and a panic into its
/// message: the reference's "thrown error" for both.
pub async fn catch_failure<T, E, F>(future: F) -> Result<T, String>
where
    F: Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    match CatchUnwind(std::pin::pin!(future)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(error.to_string()),
        Err(payload) => Err(panic_message(payload.as_ref())),
    }
}

/// Like [`catch_failure`] for an infallible future: only panics become errors.
pub async fn catch_panic<T, F>(future: F) -> Result<T, String>
where
    F: Future<Output = T>,
{
    CatchUnwind(std::pin::pin!(future)).await.map_err(|payload| panic_message(payload.as_ref()))
}

/// Call a hook and run its future like [`catch_failure`]; a panic while *building* the
/// future (before its first poll) is caught too.
pub async fn catch_call<T, E, F, Fut>(call: F) -> Result<T, String>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    match std::panic::catch_unwind(AssertUnwindSafe(call)) {
        Ok(future) => catch_failure(future).await,
        Err(payload) => Err(panic_message(payload.as_ref())),
    }
}

/// A future whose panics while polled become `Err(payload)`.
struct CatchUnwind<'a, F>(Pin<&'a mut F>);

impl<F: Future> Future for CatchUnwind<'_, F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let future = self.get_mut().0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Err(payload) => Poll::Ready(Err(payload)),
        }
    }
}
