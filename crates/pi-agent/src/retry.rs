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
//!    the error text; the delay is `base_delay · 2^(attempt−1)`, capped at `max_delay` (the
//!    reference's `retryDelayMs`);
//! 2. the agent sleeps that long; an abort ([`Agent::abort`](crate::Agent::abort), dropping the
//!    run's handle) during the sleep ends the run as it is, with the failed message in the
//!    transcript, and reports [`RetryEvent::Finished`] unsuccessful;
//! 3. the failed message is removed from the transcript, [`RetryEvent::AttemptStart`] is
//!    reported, and the run continues from the transcript (a new `agent_start` … `agent_end`),
//!    all within the same [`RunHandle`](crate::RunHandle).
//!
//! Aborted responses and other errors end the run at once; after at least one retry,
//! [`RetryEvent::Finished`] tells whether a later attempt succeeded. A server's own delay
//! request (`retry-after`) is honoured by the adapters' request-level retry before a response
//! fails (docs/providers.md); the agent's retry comes on top of it. The sleep uses the Tokio
//! runtime's timer: on a runtime built without it, no retry is made.

use std::sync::Arc;
use std::time::Duration;

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
