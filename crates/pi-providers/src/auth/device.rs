//! Polling an RFC 8628 device authorization, as the reference's `pollOAuthDeviceCodeFlow`
//! does: every interval (the server's, at least one second, five when it names none; optionally
//! waiting one interval before the first poll) until the code expires; `slow_down` takes the
//! server's new interval, else adds five seconds (RFC 8628 §3.5). A flow that is dropped stops
//! polling (Rust's cancellation).

use std::future::Future;
use std::time::Duration;

// Tokio's clock, so the deadline and the sleeps read one clock (a paused test clock included).
use tokio::time::Instant;

/// Used when the server names no interval (RFC 8628 §3.2).
const DEFAULT_INTERVAL_SECONDS: f64 = 5.0;
const MINIMUM_INTERVAL: Duration = Duration::from_secs(1);
const SLOW_DOWN_STEP: Duration = Duration::from_secs(5);
const TIMEOUT_MESSAGE: &str = "Device flow timed out";
const SLOW_DOWN_TIMEOUT_MESSAGE: &str = "Device flow timed out after one or more slow_down responses. This is often \
                                         caused by clock drift in WSL or VM environments. Please sync or restart the \
                                         VM clock and try again.";

/// One poll's outcome.
pub(crate) enum Poll<T> {
    /// Not yet.
    Pending,
    /// Poll less often: the server's new interval in seconds, if it named one.
    SlowDown(Option<f64>),
    /// Done.
    Complete(T),
    /// The sign-in failed with this message.
    Failed(String),
}

fn interval_of(seconds: f64) -> Duration {
    if seconds.is_finite() && seconds > 0.0 {
        Duration::from_secs_f64(seconds.min(3600.0)).max(MINIMUM_INTERVAL)
    } else {
        MINIMUM_INTERVAL
    }
}

/// Poll with `poll` until it completes or fails, or `expires_in_seconds` pass (unbounded when
/// `None`).
pub(crate) async fn poll_device_code<T, F, Fut>(
    interval_seconds: Option<f64>,
    expires_in_seconds: Option<f64>,
    wait_before_first_poll: bool,
    mut poll: F,
) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Poll<T>, String>>,
{
    let deadline = expires_in_seconds
        .filter(|s| s.is_finite() && *s >= 0.0)
        .and_then(|s| Instant::now().checked_add(Duration::from_secs_f64(s.min(1e9))));
    let remaining = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let mut interval = interval_of(interval_seconds.unwrap_or(DEFAULT_INTERVAL_SECONDS));
    let mut slow_downs = 0u32;
    if wait_before_first_poll {
        match remaining() {
            Some(left) if left.is_zero() => {}
            Some(left) => tokio::time::sleep(interval.min(left)).await,
            None => tokio::time::sleep(interval).await,
        }
    }
    while remaining().is_none_or(|left| !left.is_zero()) {
        match poll().await? {
            Poll::Complete(value) => return Ok(value),
            Poll::Failed(message) => return Err(message),
            Poll::Pending => {}
            Poll::SlowDown(seconds) => {
                slow_downs = slow_downs.saturating_add(1);
                interval = match seconds {
                    Some(s) if s.is_finite() && s > 0.0 => interval_of(s),
                    _ => interval.saturating_add(SLOW_DOWN_STEP),
                };
            }
        }
        match remaining() {
            Some(left) if left.is_zero() => break,
            Some(left) => tokio::time::sleep(interval.min(left)).await,
            None => tokio::time::sleep(interval).await,
        }
    }
    Err(if slow_downs > 0 { SLOW_DOWN_TIMEOUT_MESSAGE } else { TIMEOUT_MESSAGE }.to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn slow_down_widens_the_interval_and_the_code_expires() {
        let started = tokio::time::Instant::now();
        let mut polls = Vec::new();
        let result: Result<(), String> = poll_device_code(Some(2.0), Some(30.0), true, || {
            polls.push(started.elapsed().as_secs());
            async { Ok(Poll::SlowDown(None)) }
        })
        .await;
        // 2 s before the first poll, then 7, 12, 17 s apart; the deadline at 30 s ends it.
        assert_eq!(polls, vec![2, 9, 21]);
        assert_eq!(result.unwrap_err(), SLOW_DOWN_TIMEOUT_MESSAGE);
    }

    #[tokio::test(start_paused = true)]
    async fn the_servers_interval_wins_and_completion_ends_the_poll() {
        let mut n = 0;
        let result = poll_device_code(None, None, false, || {
            n += 1;
            let answer = match n {
                1 => Poll::SlowDown(Some(0.2)),
                2 => Poll::Pending,
                _ => Poll::Complete(n),
            };
            async move { Ok(answer) }
        })
        .await;
        assert_eq!(result, Ok(3));
        let failed: Result<(), String> =
            poll_device_code(Some(1.0), Some(5.0), false, || async { Ok(Poll::Failed("denied".into())) }).await;
        assert_eq!(failed.unwrap_err(), "denied");
    }
}
