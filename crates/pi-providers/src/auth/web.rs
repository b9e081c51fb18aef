//! The sign-in flows' HTTP requests: each bounded in time and in the size of its answer.

use std::time::Duration;

use serde_json::Value;

/// Longest wait for one answer of a sign-in host (the reference's 30 seconds).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A status and a body.
pub(crate) struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
    /// The `Retry-After` header, if any.
    pub retry_after: Option<String>,
}

impl Answer {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// At most 4000 bytes of the body, for an error text (only ever of a failed answer: a
    /// successful one carries tokens).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body[..self.body.len().min(4000)]).into_owned()
    }
}

pub(crate) fn client(configured: Option<&reqwest::Client>) -> Result<reqwest::Client, String> {
    match configured {
        Some(client) => Ok(client.clone()),
        None => crate::transport::client::for_token_request(),
    }
}

/// Send `request` and read the answer within `timeout`.
pub(crate) async fn send(request: reqwest::RequestBuilder, timeout: Duration) -> Result<Answer, String> {
    let timed_out = || "The operation was aborted due to timeout".to_owned();
    let response = tokio::time::timeout(timeout, request.send())
        .await
        .map_err(|_| timed_out())?
        .map_err(|e| crate::transport::http::deepest_cause(&e))?;
    let status = response.status().as_u16();
    let retry_after =
        response.headers().get(reqwest::header::RETRY_AFTER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body = tokio::time::timeout(
        timeout,
        crate::transport::http::read_to_cap(response, crate::transport::http::MAX_TOKEN_BODY_BYTES),
    )
    .await
    .map_err(|_| timed_out())?
    .map_err(|e| crate::transport::http::deepest_cause(&e))?;
    Ok(Answer { status, body, retry_after })
}

/// A field of a JSON answer as a non-empty string.
pub(crate) fn text_field(json: &Value, key: &str) -> Option<String> {
    json.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// Milliseconds since the epoch, now.
pub(crate) fn now_ms() -> u64 {
    pi_types::now_ms()
}

/// `now + seconds * 1000 - margin_ms`, clamped at zero (the reference's expiry arithmetic).
pub(crate) fn expiry(now_ms: u64, seconds: f64, margin_ms: u64) -> u64 {
    let at = now_ms as f64 + seconds * 1000.0 - margin_ms as f64;
    if at.is_finite() && at > 0.0 {
        at.min(u64::MAX as f64) as u64
    } else {
        0
    }
}

/// `url` as sent: unchanged, or, with a stand-in origin `via` (a test's loopback server for
/// every host at once), `<via>/<host>/<path>` in place of `https://<host>/<path>`.
pub(crate) fn route(via: Option<&str>, url: &str) -> String {
    match via {
        Some(origin) => {
            let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")).unwrap_or(url);
            format!("{}/{rest}", origin.trim_end_matches('/'))
        }
        None => url.to_owned(),
    }
}

/// A form POST answered in JSON (`Accept: application/json`).
pub(crate) async fn post_form(
    client: &reqwest::Client,
    url: &str,
    form: &[(&str, &str)],
    timeout: Duration,
) -> Result<Answer, String> {
    let request = client
        .post(url)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("Accept", "application/json")
        .body(crate::api::support::form_encode(form));
    send(request, timeout).await
}

/// The `http:` or `https:` URL `value` names, normalized, or `None` (the reference's
/// `trustedHttpUrl`: a server-supplied page to open must not be a `file:` URL or another scheme).
pub(crate) fn trusted_http_url(value: Option<&Value>) -> Option<String> {
    let url = reqwest::Url::parse(value?.as_str()?).ok()?;
    matches!(url.scheme(), "http" | "https").then(|| url.to_string())
}

/// A positive, finite number field.
pub(crate) fn positive_number(json: &Value, key: &str) -> Option<f64> {
    json.get(key).and_then(Value::as_f64).filter(|n| n.is_finite() && *n > 0.0)
}
