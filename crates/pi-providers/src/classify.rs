//! Error classifiers of the reference: context overflow (`utils/overflow.js`) and transient
//! provider errors worth retrying (`utils/retry.js`).

use std::sync::OnceLock;

use pi_types::{AssistantMessage, StopReason};
use regex::{Regex, RegexSet};

fn set(patterns: &[&str]) -> RegexSet {
    let patterns: Vec<String> = patterns.iter().map(|p| format!("(?i){p}")).collect();
    #[allow(clippy::expect_used)]
    RegexSet::new(patterns).expect("static patterns compile")
}

fn overflow_patterns() -> &'static RegexSet {
    static SET: OnceLock<RegexSet> = OnceLock::new();
    SET.get_or_init(|| {
        set(&[
            r"prompt (?:is )?too long",
            r"prompt exceeds max length",
            r"(?:^|[^a-z0-9_])request_too_large(?:$|[^a-z0-9_])",
            r"input is too long for requested model",
            r"exceeds the context window",
            r"exceeds (?:the )?(?:model'?s )?maximum context length(?: of [\d,]+ tokens?|\s*\([\d,]+\))",
            r"context window exceeded",
            r"input token count.*exceeds the maximum",
            r"maximum prompt length is \d+",
            r"reduce the length of the messages",
            r"maximum context length is \d+ tokens",
            r"exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?",
            r"input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)",
            r"exceeds the limit of \d+",
            r"exceeds the available context size",
            r"greater than the context length",
            r"context window exceeds limit",
            r"exceeded model token limit",
            r"too large for model with \d+ maximum context length",
            r"prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?",
            r"model_context_window_exceeded",
            r"prompt too long; exceeded (?:max )?context length",
            r"range of input length should be",
            r"context[_ ]length[_ ]exceeded",
            r"too many tokens",
            r"token limit exceeded",
            r"^(?:[\w -]+ API error \(413\):|413(?:\s|:|$))",
        ])
    })
}

fn non_overflow_patterns() -> &'static RegexSet {
    static SET: OnceLock<RegexSet> = OnceLock::new();
    SET.get_or_init(|| set(&[r"^(Throttling error|Service unavailable):", r"rate limit", r"too many requests"]))
}

fn cerebras_bodyless() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    #[allow(clippy::expect_used)]
    RE.get_or_init(|| Regex::new(r"(?i)^4(?:00|13)\s*(?:status code)?\s*\(no body\)").expect("static pattern compiles"))
}

/// Whether a failed (or silently truncated) response means the context window overflowed.
pub fn is_context_overflow(message: &AssistantMessage, context_window: Option<u64>) -> bool {
    if message.stop_reason == StopReason::Error {
        if let Some(error) = message.error_message.as_deref().filter(|e| !e.is_empty()) {
            if !non_overflow_patterns().is_match(error)
                && (overflow_patterns().is_match(error)
                    || (message.provider == "cerebras" && cerebras_bodyless().is_match(error)))
            {
                return true;
            }
        }
    }
    let window = context_window.filter(|w| *w > 0);
    if let Some(window) = window {
        let input = message.usage.input.saturating_add(message.usage.cache_read);
        if message.stop_reason == StopReason::Stop && input > window {
            return true;
        }
        if message.stop_reason == StopReason::Length
            && message.usage.output == 0
            && input as f64 >= window as f64 * 0.99
        {
            return true;
        }
    }
    false
}

/// Whether a `length` stop left output room below the desired maximum.
pub fn is_recoverable_length(message: &AssistantMessage, desired_max_output: u64) -> bool {
    message.stop_reason == StopReason::Length && desired_max_output > 0 && message.usage.output < desired_max_output
}

fn non_retryable_patterns() -> &'static RegexSet {
    static SET: OnceLock<RegexSet> = OnceLock::new();
    SET.get_or_init(|| {
        set(&[
            "GoUsageLimitError",
            "FreeUsageLimitError",
            "Monthly usage limit reached",
            "available balance",
            "insufficient_quota",
            "out of budget",
            "quota exceeded",
            "billing",
            "subscription_sharing_usage_limit_exceeded",
            "subscription_sharing_workplace_individual_usage_limit_exceeded",
            r#""code"\s*:\s*"?1308(?:$|[^0-9])"#,
        ])
    })
}

fn retryable_patterns() -> &'static RegexSet {
    static SET: OnceLock<RegexSet> = OnceLock::new();
    SET.get_or_init(|| {
        set(&[
            "overloaded",
            "server_busy",
            "servers are currently busy",
            "currently experiencing high demand",
            "model is at capacity",
            "admission ceiling",
            "rate.?limit",
            "too many requests",
            "rate increased too quickly",
            r"(?:^|[^a-z0-9])(?:429|500|502|503|504|520|524|525)(?:$|[^a-z0-9])",
            "service.?(?:is.?)?(?:temporarily.?)?unavailable",
            "provider.?(?:is.?)?temporarily.?unavailable",
            "server.?error",
            "internal.?error",
            "provider.?returned.?(?:an.?)?error",
            r#""type"\s*:\s*"api_error""#,
            "exceeded request buffer limit while retrying upstream",
            "unable to forward upstream",
            "upstream.?request.?failed",
            "upstream_stream_read_error",
            "stream was interrupted",
            "http/?2 stream failed",
            "network.?error",
            "connection.?error",
            "connection.?refused",
            "connection.?lost",
            "connection.?closed",
            "other side closed",
            "fetch failed",
            r"request to \S+ failed, reason:",
            "getaddrinfo",
            r"(?:^|[^a-z0-9_])(?:ECONNRESET|ECONNABORTED|ECONNREFUSED|ETIMEDOUT|EPIPE)(?:$|[^a-z0-9_])",
            "connection reset by peer",
            "ENOTFOUND",
            "EAI_AGAIN",
            "upstream.?connect",
            "reset before headers",
            "socket hang up",
            "socket connection was closed",
            "timed? out",
            "timeout",
            "terminated",
            "websocket.?closed",
            "websocket.?error",
            "websocket.?connection.?limit.?reached",
            "ended without",
            "stream ended before message_stop",
            "stream ended before a terminal response event",
            "http2 request did not get a response",
            "provider finish_reason: error",
            "provider stopped with: error",
            "returned an empty response",
            "stopped before completing the response",
            "stream disconnected before completion",
            "cut short after the reply had begun",
            "ended the response before it was complete",
            "connection to the provider was reset",
            "reported a failure while generating the response",
            "pending stream has been canceled",
            "retry delay",
            "you can retry your request",
            "try your request again",
            "please retry your request",
            "repeat the request later",
            "ResourceExhausted",
            "subscription_sharing_usage_unavailable",
            "subscription_sharing_user_unavailable",
        ])
    })
}

fn refused_patterns() -> &'static RegexSet {
    static SET: OnceLock<RegexSet> = OnceLock::new();
    SET.get_or_init(|| set(&["connection.?refused", r"(?:^|[^a-z0-9_])ECONNREFUSED(?:$|[^a-z0-9_])"]))
}

/// Whether a failed message looks like a transient provider or transport error.
///
/// The reference's `isRetryableAssistantError`, but for a refused connection: nothing listens
/// at the URL (a wrong URL, a server that is down), so retrying would only delay the same
/// answer (2 + 4 + 8 s with the default policy). pi-ai retries it; not retrying it is a
/// deliberate difference (docs/reliability.md). See [`is_refused_connection`].
pub fn is_retryable_error(message: &AssistantMessage) -> bool {
    if message.stop_reason != StopReason::Error {
        return false;
    }
    let Some(error) = message.error_message.as_deref().filter(|e| !e.is_empty()) else { return false };
    !non_retryable_patterns().is_match(error)
        && retryable_patterns().is_match(error)
        && !refused_patterns().is_match(error)
}

/// Whether a failed message says the server refused the connection (the OS's words as the
/// HTTP client and the proxy pass them on, or Node's `ECONNREFUSED`).
pub fn is_refused_connection(message: &AssistantMessage) -> bool {
    message.stop_reason == StopReason::Error
        && message.error_message.as_deref().is_some_and(|error| refused_patterns().is_match(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(text: &str) -> AssistantMessage {
        AssistantMessage { stop_reason: StopReason::Error, error_message: Some(text.into()), ..Default::default() }
    }

    #[test]
    fn classifies() {
        assert!(is_context_overflow(&failed("prompt is too long: 210000 tokens > 200000 maximum"), None));
        assert!(!is_context_overflow(&failed("429 rate limit: too many tokens"), None));
        assert!(is_retryable_error(&failed("503 Service Unavailable")));
        assert!(!is_retryable_error(&failed("request id 15003")));
        assert!(!is_retryable_error(&failed("429 insufficient_quota")));
        assert!(is_retryable_error(&failed("read ECONNRESET")));
    }

    /// A refused connection fails at once, as the reference's classifier would not have it.
    #[test]
    fn a_refused_connection_is_not_retried() {
        for text in [
            "Connection error.: Connection refused (os error 111)",
            "request to http://127.0.0.1:9/v1 failed, reason: connect ECONNREFUSED 127.0.0.1:9",
        ] {
            assert!(is_refused_connection(&failed(text)), "{text}");
            assert!(!is_retryable_error(&failed(text)), "{text}");
        }
        assert!(!is_refused_connection(&failed("read ECONNRESET")));
        assert!(is_retryable_error(&failed("Connection error.: connection closed before message completed")));
    }

    /// The patterns pi-ai 1.6.1 added, each on the wording it was added for.
    #[test]
    fn classifies_the_1_6_1_patterns() {
        for text in [
            "waited 73.4s in queue, reaching this model's admission ceiling of 60s",
            "slow_down: Rate increased too quickly",
            "525 <none>",
            "The provider is temporarily unavailable. Retry shortly.",
            r#"{"type":"error","error":{"type": "api_error","message":"Unable to complete this request right now."}}"#,
            "Provider finish_reason: error",
            "Provider stopped with: error",
            "Provider returned an empty response",
            "Upstream error from Relace: The model stopped before completing the response.",
            "The provider ended the response before it was complete.",
            "The connection to the provider was reset.",
            "The provider reported a failure while generating the response.",
            "Unable to process request. Repeat the request later.",
        ] {
            assert!(is_retryable_error(&failed(text)), "{text}");
        }
        assert!(!is_retryable_error(&failed("provider unavailable for this route")));
        assert!(!is_retryable_error(&failed("request id 5251")));
        assert!(is_context_overflow(&failed(r#"413 {"error":{"type":"request_too_large"}}"#), None));
        assert!(is_context_overflow(&failed("error: request_too_large"), None));
        assert!(!is_context_overflow(&failed("invalid_request_too_large_field"), None));
        assert!(!is_context_overflow(&failed("error: request_too_large2"), None));
    }
}
