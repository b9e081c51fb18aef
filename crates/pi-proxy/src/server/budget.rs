//! Per-token budgets (opt-in): requests per minute and tokens per day, checked before the
//! upstream is called.
//!
//! Both are fixed windows that start with a token's first request after the previous window
//! ended. A request over either budget gets 429 with `retry-after` (the seconds until its
//! window ends). Tokens are charged when a stream ends: the usage the upstream reported, or,
//! for a stream that ended without usage (client gone, timeout), its `maxTokens`. While a
//! daily budget is set, a request's `maxTokens` is also cut to what is left of it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::StatusCode;

use super::validate::Refusal;

const MINUTE: Duration = Duration::from_secs(60);
const DAY: Duration = Duration::from_secs(24 * 60 * 60);

#[derive(Default)]
struct Window {
    start: Option<Instant>,
    used: u64,
}

impl Window {
    /// The window at `now`: a new one once `length` has passed.
    fn current(&mut self, now: Instant, length: Duration) -> &mut Self {
        if self.start.is_none_or(|start| now.duration_since(start) >= length) {
            *self = Self { start: Some(now), used: 0 };
        }
        self
    }

    /// Whole seconds until the window ends (at least 1).
    fn retry_after(&self, now: Instant, length: Duration) -> u64 {
        let end = self.start.map_or(now, |start| start + length);
        end.saturating_duration_since(now).as_secs().max(1)
    }
}

#[derive(Default)]
struct Usage {
    minute: Window,
    day: Window,
}

/// The budgets of every token.
pub(crate) struct Budgets {
    requests_per_minute: Option<u64>,
    tokens_per_day: Option<u64>,
    tokens: Mutex<HashMap<String, Usage>>,
}

/// What an admitted request may spend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Admitted {
    /// Tokens left today, when a daily budget is set.
    pub tokens_left: Option<u64>,
}

fn over(message: &str, retry_after: u64) -> Refusal {
    let mut refusal = Refusal::new(StatusCode::TOO_MANY_REQUESTS, message);
    refusal.retry_after = Some(retry_after);
    refusal
}

impl Budgets {
    pub(crate) fn new(requests_per_minute: Option<u64>, tokens_per_day: Option<u64>) -> Self {
        Self { requests_per_minute, tokens_per_day, tokens: Mutex::default() }
    }

    /// Count one request of `token_id`, or refuse it with 429.
    pub(crate) fn admit(&self, token_id: &str) -> Result<Admitted, Refusal> {
        if self.requests_per_minute.is_none() && self.tokens_per_day.is_none() {
            return Ok(Admitted { tokens_left: None });
        }
        let now = Instant::now();
        let mut tokens = self.tokens.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let usage = tokens.entry(token_id.to_owned()).or_default();
        let mut tokens_left = None;
        if let Some(limit) = self.tokens_per_day {
            let day = usage.day.current(now, DAY);
            if day.used >= limit {
                return Err(over("Daily token budget of this token is spent", day.retry_after(now, DAY)));
            }
            tokens_left = Some(limit - day.used);
        }
        if let Some(limit) = self.requests_per_minute {
            let minute = usage.minute.current(now, MINUTE);
            if minute.used >= limit {
                return Err(over("Too many requests per minute for this token", minute.retry_after(now, MINUTE)));
            }
            minute.used += 1;
        }
        Ok(Admitted { tokens_left })
    }

    /// Charge `tokens` to `token_id`'s daily budget.
    pub(crate) fn charge(&self, token_id: &str, tokens: u64) {
        if self.tokens_per_day.is_none() {
            return;
        }
        let mut all = self.tokens.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let day = all.entry(token_id.to_owned()).or_default().day.current(Instant::now(), DAY);
        day.used = day.used.saturating_add(tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_tokens_are_counted_per_token() {
        let budgets = Budgets::new(Some(2), Some(100));
        assert_eq!(budgets.admit("a"), Ok(Admitted { tokens_left: Some(100) }));
        budgets.charge("a", 60);
        assert_eq!(budgets.admit("a"), Ok(Admitted { tokens_left: Some(40) }));
        let refused = budgets.admit("a").err();
        assert_eq!(refused.as_ref().map(|r| r.status), Some(StatusCode::TOO_MANY_REQUESTS));
        assert!(refused.and_then(|r| r.retry_after).is_some_and(|s| (1..=60).contains(&s)));
        assert!(budgets.admit("b").is_ok());
        budgets.charge("b", 100);
        let spent = budgets.admit("b").err().map(|r| r.message);
        assert_eq!(spent.as_deref(), Some("Daily token budget of this token is spent"));
        assert_eq!(Budgets::new(None, None).admit("c"), Ok(Admitted { tokens_left: None }));
    }
}
