//! Retrying a run whose response failed with a transient provider error (opt-in).
//!
//! # Protocol
//! The semantics of pi-ai's `retryAssistantCall`, applied to an agent's run the way pi's
//! coding agent applies its `retry` settings: when a run ends with an assistant message whose
//! stop reason is `error` and which the policy's classifier calls retryable (for the built-in
//! providers, `pi_providers::is_retryable_error`, the reference's `isRetryableAssistantError`:
//! overload, rate limits, 5xx, dropped connections, but not quota or billing exhaustion), and
//! retries remain:
//!
//! 1. [`RetryEvent::Scheduled`] is reported with the attempt (from 1), the budget, the delay and
//!    the error text; the delay is the one the failed response asked for (`retry-after-ms`, or
//!    `retry-after` in seconds or as an HTTP date) when it asked for one, else
//!    `base_delay · 2^(attempt−1)` (the reference's `retryDelayMs`), capped at `max_delay`
//!    either way (see [`RetryPolicy::delay_for`]);
//! 2. the agent sleeps that long; an abort ([`Agent::abort`](crate::Agent::abort), dropping the
//!    run's handle) during the sleep ends the run as it is, with the failed message in the
//!    transcript, and reports [`RetryEvent::Finished`] unsuccessful;
//! 3. the failed message is removed from the transcript, [`RetryEvent::AttemptStart`] is
//!    reported, and the run continues from the transcript (a new `agent_start` … `agent_end`),
//!    all within the same [`RunHandle`](crate::RunHandle).
//!
//! Aborted responses and other errors end the run at once; after at least one retry,
//! [`RetryEvent::Finished`] tells whether a later attempt succeeded. The adapters' own
//! request-level retry honours a server's delay request before a response fails
//! (docs/providers.md); the agent's retry comes on top of it.
//!
//! # The server's delay request
//! The reference's `retryAssistantCall` ignores `retry-after`: a 500 asking for 10 s is retried
//! after 2 s. The agent honours it (a deliberate difference, docs/reliability.md). It reads the
//! request through the typed seam every HTTP provider already feeds, the `on_response` hook
//! ([`pi_types::ProviderResponse`], called for each failed attempt with its status and
//! headers): while a policy is set, the agent's hook notes the delay of the last non-2xx
//! response ([`pi_types::server_retry_delay_ms`]), and a 2xx response or the start of an
//! attempt clears it; a hook of the agent's options still runs, after. So neither the
//! message nor the event changes shape, and a stream function that reports no responses (the
//! faux provider, a remote one) keeps the exponential delays. The sleep uses the Tokio
//! runtime's timer: on a runtime built without it, no retry is made.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pi_loop::{Hooks, SetHooks};
use pi_types::AssistantMessage;

/// Decides whether a failed response is worth retrying.
pub type RetryClassifier = Arc<dyn Fn(&AssistantMessage) -> bool + Send + Sync>;

/// Receives the [`RetryEvent`]s of a policy.
pub type RetryObserver = Arc<dyn Fn(&RetryEvent) + Send + Sync>;

/// When and how often a run is retried (the protocol: `docs/sessions.md`, "Retries").
#[derive(Clone)]
pub struct RetryPolicy {
    max_retries: u32,
    base_delay: Duration,
    max_delay: Duration,
    retryable: RetryClassifier,
    observer: Option<RetryObserver>,
}

impl std::fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_retries", &self.max_retries)
            .field("base_delay", &self.base_delay)
            .field("max_delay", &self.max_delay)
            .finish_non_exhaustive()
    }
}

/// What a retrying run reports to the policy's observer (the reference's `RetryCallbacks`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RetryEvent {
    /// A retry is due after `delay`.
    Scheduled {
        /// The retry's number, from 1.
        attempt: u32,
        /// The policy's budget.
        max_attempts: u32,
        /// How long the agent waits first.
        delay: Duration,
        /// The failed response's error text.
        error_message: String,
    },
    /// The wait is over; the retried run starts.
    AttemptStart {
        /// The retry's number, from 1.
        attempt: u32,
    },
    /// Retrying ended (reported only after at least one retry was scheduled).
    Finished {
        /// Whether a later attempt completed normally.
        success: bool,
        /// The last retry's number.
        attempt: u32,
        /// The error text that ended it, if it ended in an error.
        final_error: Option<String>,
    },
}

impl RetryPolicy {
    /// A policy retrying what `retryable` accepts, up to 3 times, 2 s apart at first,
    /// doubling, at most 60 s (the defaults of pi's coding agent and of `retryDelayMs`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use pi_agent::RetryPolicy;
    ///
    /// let policy = RetryPolicy::new(pi_providers::is_retryable_error).max_retries(5);
    /// assert_eq!(policy.delay(1), Duration::from_secs(2));
    /// assert_eq!(policy.delay(3), Duration::from_secs(8));
    /// assert_eq!(policy.delay(40), Duration::from_secs(60));
    /// ```
    pub fn new(retryable: impl Fn(&AssistantMessage) -> bool + Send + Sync + 'static) -> Self {
        Self {
            max_retries: 3,
            base_delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(60),
            retryable: Arc::new(retryable),
            observer: None,
        }
    }

    /// At most `retries` retries per run (0: none).
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// The first retry's delay.
    pub fn base_delay(mut self, delay: Duration) -> Self {
        self.base_delay = delay;
        self
    }

    /// The cap on every delay.
    pub fn max_delay(mut self, delay: Duration) -> Self {
        self.max_delay = delay;
        self
    }

    /// Report each [`RetryEvent`] to `observer` (called synchronously; keep it short).
    pub fn on_retry(mut self, observer: impl Fn(&RetryEvent) + Send + Sync + 'static) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// The delay before retry `attempt` (from 1): `base_delay · 2^(attempt−1)`, at most
    /// `max_delay`.
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.saturating_sub(1)).unwrap_or(u32::MAX);
        self.base_delay.checked_mul(factor).unwrap_or(Duration::MAX).min(self.max_delay)
    }

    /// The delay before retry `attempt` (from 1) of a response that asked for `requested`
    /// (its `retry-after`): the request, at most `max_delay`; without one, [`delay`](Self::delay).
    ///
    /// ```
    /// use std::time::Duration;
    /// use pi_agent::RetryPolicy;
    ///
    /// let policy = RetryPolicy::new(pi_providers::is_retryable_error).max_delay(Duration::from_secs(30));
    /// assert_eq!(policy.delay_for(1, Some(Duration::from_secs(10))), Duration::from_secs(10));
    /// assert_eq!(policy.delay_for(1, Some(Duration::from_secs(120))), Duration::from_secs(30));
    /// assert_eq!(policy.delay_for(2, None), Duration::from_secs(4));
    /// ```
    pub fn delay_for(&self, attempt: u32, requested: Option<Duration>) -> Duration {
        match requested {
            Some(requested) => requested.min(self.max_delay),
            None => self.delay(attempt),
        }
    }

    pub(crate) fn budget(&self) -> u32 {
        self.max_retries
    }

    pub(crate) fn is_retryable(&self, message: &AssistantMessage) -> bool {
        (self.retryable)(message)
    }

    pub(crate) fn report(&self, event: RetryEvent) {
        if let Some(observer) = &self.observer {
            observer(&event);
        }
    }
}

/// The delay the last failed response of a run's requests asked for (see "The server's delay
/// request" above).
#[derive(Debug, Default)]
pub(crate) struct ServerDelay(Mutex<Option<Duration>>);

impl ServerDelay {
    /// Forget the last response's request: a new attempt starts.
    pub(crate) fn clear(&self) {
        *self.slot() = None;
    }

    /// The request of the last response, if it failed and asked for a delay.
    pub(crate) fn take(&self) -> Option<Duration> {
        self.slot().take()
    }

    fn note(&self, response: &pi_types::ProviderResponse) {
        let requested = match response.status {
            200..=299 => None,
            // A date in the past asks for no wait; `as` saturates an absurd one.
            _ => response.retry_after_ms().map(|ms| Duration::from_millis(ms.max(0.0) as u64)),
        };
        *self.slot() = requested;
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Duration>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `hooks` with an `on_response` hook noting each response's request in `owner`'s
    /// `delay`, then calling the hook `hooks` had, if any.
    pub(crate) fn observe<T: Send + Sync + 'static>(
        owner: std::sync::Weak<T>,
        delay: fn(&T) -> &Self,
        hooks: Hooks,
    ) -> Hooks {
        let inner = hooks.fns().on_response.clone();
        hooks.on_response(move |response, model| {
            if let Some(owner) = owner.upgrade() {
                delay(&owner).note(response);
            }
            let inner = inner.as_ref().map(|hook| hook(response, model));
            async move {
                if let Some(inner) = inner {
                    inner.await;
                }
            }
        })
    }
}
