//! Cancellation of a run, a request or a tool call.
//!
//! A token is one shared flag and a list of waiters; clones share both. [`cancel`] sets the
//! flag once (later calls do nothing) and then wakes every waiter; a waiter registers under the
//! list's lock and looks at the flag there, and `cancel` takes the lock after setting it, so
//! none misses a cancellation. A waiter dropped before the cancellation leaves the list. [`is_cancelled`] is a single atomic load,
//! which is why providers can check it before every streamed delta: a token whose check takes
//! a lock (as `tokio_util`'s does) costs a measurable share of a streaming response.
//!
//! [`cancel`]: CancellationToken::cancel
//! [`is_cancelled`]: CancellationToken::is_cancelled

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

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
    waiters: Mutex<Waiters>,
}

/// The wakers of the futures waiting for the cancellation, by ticket.
#[derive(Default)]
struct Waiters {
    next_ticket: u64,
    wakers: Vec<(u64, Waker)>,
}

impl Inner {
    fn waiters(&self) -> MutexGuard<'_, Waiters> {
        // Every critical section leaves the list consistent, so a poisoned lock is usable.
        self.waiters.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl CancellationToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancel: every clone reports it, and every [`cancelled`](Self::cancelled) future ends.
    pub fn cancel(&self) {
        if !self.inner.cancelled.swap(true, Ordering::AcqRel) {
            let wakers = std::mem::take(&mut self.inner.waiters().wakers);
            wakers.into_iter().for_each(|(_, waker)| waker.wake());
        }
    }

    /// Whether [`cancel`](Self::cancel) was called on this token or a clone of it.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// Ends when the token is cancelled (at once if it already is).
    pub fn cancelled(&self) -> impl Future<Output = ()> + Send + '_ {
        Wait { inner: &self.inner, ticket: None }
    }

    /// [`cancelled`](Self::cancelled) owning its token, for a future that must be `'static`.
    pub async fn cancelled_owned(self) {
        self.cancelled().await
    }

    /// A guard that cancels this token when it is dropped (unless disarmed).
    pub fn drop_guard(self) -> CancelGuard {
        CancelGuard { token: Some(self) }
    }
}

/// What [`CancellationToken::cancelled`] returns.
struct Wait<'a> {
    inner: &'a Inner,
    /// Its place in the list, once registered.
    ticket: Option<u64>,
}

impl Future for Wait<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.inner.cancelled.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        let inner = self.inner;
        let mut waiters = inner.waiters();
        // Looked at again under the lock: `cancel` drains the list only after setting the flag.
        if inner.cancelled.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        match self.ticket.and_then(|ticket| waiters.wakers.iter_mut().find(|(t, _)| *t == ticket)) {
            Some((_, waker)) => waker.clone_from(cx.waker()),
            None => {
                let ticket = waiters.next_ticket;
                waiters.next_ticket = ticket.wrapping_add(1);
                waiters.wakers.push((ticket, cx.waker().clone()));
                drop(waiters);
                self.ticket = Some(ticket);
            }
        }
        Poll::Pending
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket {
            self.inner.waiters().wakers.retain(|(t, _)| *t != ticket);
        }
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
