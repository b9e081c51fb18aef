//! Cancellation of a run, a request or a tool call.
//!
//! A token is one shared flag and a list of waiters; clones share both. [`cancel`] sets the
//! flag once (later calls do nothing) and then wakes every waiter; a waiter registers before it
//! looks at the flag, so none misses a cancellation. [`is_cancelled`] is a single atomic load,
//! which is why providers can check it before every streamed delta: a token whose check takes
//! a lock (as `tokio_util`'s does) costs a measurable share of a streaming response.
//!
//! [`cancel`]: CancellationToken::cancel
//! [`is_cancelled`]: CancellationToken::is_cancelled

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Cancels whatever holds a clone of it: the agent loop passes one to every request
/// ([`StreamOptions::cancel`](crate::StreamOptions::cancel)) and tool call.
///
/// ```
/// use pi_types::CancellationToken;
/// let token = CancellationToken::new();
/// let seen_by_a_tool = token.clone();
/// assert!(!seen_by_a_tool.is_cancelled());
/// token.cancel();
/// assert!(seen_by_a_tool.is_cancelled());
/// // Already cancelled: waiting ends at once.
/// futures_executor::block_on(seen_by_a_tool.cancelled());
/// ```
#[derive(Clone, Default)]
pub struct CancellationToken {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    waiters: Notify,
}

impl CancellationToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancel: every clone reports it, and every [`cancelled`](Self::cancelled) future ends.
    pub fn cancel(&self) {
        if !self.inner.cancelled.swap(true, Ordering::AcqRel) {
            self.inner.waiters.notify_waiters();
        }
    }

    /// Whether [`cancel`](Self::cancel) was called on this token or a clone of it.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// Ends when the token is cancelled (at once if it already is).
    pub fn cancelled(&self) -> impl Future<Output = ()> + Send + '_ {
        wait(&self.inner)
    }

    /// [`cancelled`](Self::cancelled) owning its token, for a future that must be `'static`.
    pub async fn cancelled_owned(self) {
        wait(&self.inner).await
    }

    /// A guard that cancels this token when it is dropped (unless disarmed).
    pub fn drop_guard(self) -> CancelGuard {
        CancelGuard { token: Some(self) }
    }
}

async fn wait(inner: &Inner) {
    loop {
        let notified = inner.waiters.notified();
        let mut notified = std::pin::pin!(notified);
        // Registered before the flag is read: a `cancel` in between still wakes this waiter.
        notified.as_mut().enable();
        if inner.cancelled.load(Ordering::Acquire) {
            return;
        }
        notified.await;
    }
}

impl fmt::Debug for CancellationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancellationToken").field("is_cancelled", &self.is_cancelled()).finish()
    }
}

/// Cancels its token when dropped; see [`CancellationToken::drop_guard`].
#[derive(Debug)]
#[must_use = "the token is cancelled as soon as the guard is dropped"]
pub struct CancelGuard {
    token: Option<CancellationToken>,
}

impl CancelGuard {
    /// Give the token back without cancelling it.
    pub fn disarm(mut self) -> CancellationToken {
        self.token.take().unwrap_or_default()
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if let Some(token) = &self.token {
            token.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_waiter_ends_when_a_clone_cancels() {
        let token = CancellationToken::new();
        let waiters: Vec<_> = (0..3).map(|_| tokio::spawn(token.clone().cancelled_owned())).collect();
        tokio::task::yield_now().await;
        token.clone().cancel();
        for waiter in waiters {
            assert!(waiter.await.is_ok());
        }
        assert!(token.is_cancelled());
    }

    #[test]
    fn a_guard_cancels_when_dropped_unless_disarmed() {
        let token = CancellationToken::new();
        drop(token.clone().drop_guard());
        assert!(token.is_cancelled());
        let kept = CancellationToken::new();
        let back = kept.clone().drop_guard().disarm();
        assert!(!kept.is_cancelled() && !back.is_cancelled());
    }
}
