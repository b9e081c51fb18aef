//! Keeping credentials out of error texts: one matcher ([`Redactor`]) for every place a
//! credential could come back, the adapters' `errorMessage` and the proxy server's answers.
//!
//! A server's error body may quote the request it got, `Authorization` header included, and
//! the adapters copy that body into the `errorMessage`. A text is checked against each
//! credential in three spellings (as is, JSON-escaped, URL-encoded), and against every run of
//! `FRAGMENT_BYTES` bytes of them, so a key cut by a truncation or split over two fields of
//! a body is caught too. A hit replaces each matched stretch with `<redacted>`. A `Bearer`
//! credential in an error text is redacted whatever it is (an OAuth or cloud token minted at
//! runtime may not be in the list).
//!
//! [`Secrets`] collects what one request carried (the key, credential headers, the caller's
//! header values) for the driver, which redacts the error of every adapter with it.

use std::borrow::Cow;
use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use regex::Regex;
use serde_json::Value;

/// What a redacted stretch becomes.
pub const REDACTED: &str = "<redacted>";

/// Credentials shorter than this are not searched for (a short test key would replace
/// ordinary words).
const MIN_SECRET_BYTES: usize = 8;

/// Any run of this many bytes of a credential counts as the credential.
const FRAGMENT_BYTES: usize = 12;

/// A `Bearer` credential: the scheme, its separator (raw, URL-encoded) and 8 or more token
/// characters (RFC 6750 `b64token`).
static BEARER: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)(bearer)(\s+|%20|\+)[A-Za-z0-9\-._~+/]{8,}=*").ok());

/// A matcher for a set of credentials.
pub struct Redactor {
    matcher: Option<AhoCorasick>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor").field("patterns", &self.matcher.as_ref().map(AhoCorasick::patterns_len)).finish()
    }
}

/// `secret` as it appears inside a JSON string and in a URL query.
fn spellings(secret: &str) -> [String; 3] {
    let json = serde_json::to_string(secret).unwrap_or_default();
    let json = json.get(1..json.len().saturating_sub(1)).unwrap_or_default().to_owned();
    let url = form_urlencoded::byte_serialize(secret.as_bytes()).collect();
    [secret.to_owned(), json, url]
}

impl Redactor {
    /// A matcher for `secrets` (those shorter than 8 bytes are left out).
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        for secret in secrets.into_iter().filter(|s| s.len() >= MIN_SECRET_BYTES) {
            for spelling in spellings(secret) {
                let bytes = spelling.as_bytes();
                if bytes.len() <= FRAGMENT_BYTES {
                    patterns.push(bytes.to_vec());
                } else {
                    patterns.extend(bytes.windows(FRAGMENT_BYTES).map(<[u8]>::to_vec));
                }
            }
        }
        patterns.sort_unstable();
        patterns.dedup();
        let matcher = if patterns.is_empty() { None } else { AhoCorasick::new(&patterns).ok() };
        Self { matcher }
    }

    /// Whether `text` holds any part of a credential.
    pub fn hits(&self, text: &[u8]) -> bool {
        self.matcher.as_ref().is_some_and(|m| m.is_match(text))
    }

    /// `text` with every stretch of a credential replaced.
    pub fn text<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let Some(matcher) = &self.matcher else { return Cow::Borrowed(text) };
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for found in matcher.find_overlapping_iter(text) {
            // A fragment may start or end inside a multi-byte character: widen to whole ones.
            let mut start = found.start();
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            let mut end = found.end();
            while !text.is_char_boundary(end) {
                end += 1;
            }
            match spans.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => spans.push((start, end)),
            }
        }
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (start, end) in spans {
            out.push_str(&text[at..start]);
            out.push_str(REDACTED);
            at = end;
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }

    /// An error text for a client: credentials and `Bearer` tokens redacted, then bounded as
    /// the adapters bound their `errorMessage` (redacting first, so no cut leaves a prefix).
    pub fn error_text(&self, text: &str) -> String {
        let text = self.text(text);
        let text = match BEARER.as_ref() {
            Some(bearer) => bearer.replace_all(&text, format!("${{1}}${{2}}{REDACTED}").as_str()).into_owned(),
            None => text.into_owned(),
        };
        crate::transport::http::bound_error_message(text)
    }

    /// A JSON value with every string redacted (keys too).
    pub fn value(&self, value: &mut Value) {
        match value {
            Value::String(text) => {
                if let Cow::Owned(clean) = self.text(text) {
                    *text = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.value(item)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (key, mut item) in entries {
                    self.value(&mut item);
                    map.insert(self.text(&key).into_owned(), item);
                }
            }
            _ => {}
        }
    }
}

/// Headers whose values are never credentials: they stay in error texts.
const PUBLIC_HEADERS: [&str; 10] = [
    "accept",
    "accept-encoding",
    "content-type",
    "content-length",
    "user-agent",
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
    "x-amz-date",
    "x-amz-content-sha256",
];

/// What one request carried that an error text must not quote: the API key and the value of
/// every header but the public ones (`PUBLIC_HEADERS`) (`Authorization`'s scheme and parameter
/// names stay: a `Bearer` or SigV4 credential is redacted, its wording is not). A
/// [`Redactor`] is built from them only when there is an error text to clean.
#[derive(Default)]
pub struct Secrets(Vec<String>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({})", self.0.len())
    }
}

impl Secrets {
    /// The credentials of `request` sent with `options`.
    pub(crate) fn of(request: &crate::transport::http::Request, options: &pi_types::StreamOptions) -> Self {
        let mut secrets: Vec<String> = options.api_key.iter().cloned().collect();
        for (name, value) in &request.headers {
            if PUBLIC_HEADERS.iter().any(|public| name.eq_ignore_ascii_case(public))
                || name.to_ascii_lowercase().starts_with("x-stainless-")
            {
                continue;
            }
            if name.eq_ignore_ascii_case("authorization") {
                secrets.extend(authorization_credentials(value).map(str::to_owned));
            } else {
                secrets.push(value.clone());
            }
        }
        secrets.retain(|secret| secret.len() >= MIN_SECRET_BYTES);
        secrets.sort_unstable();
        secrets.dedup();
        Self(secrets)
    }

    /// Whether there is anything to redact.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `diagnostic` without these credentials: its error text and every string of its details.
    pub(crate) fn clean_diagnostic(&self, diagnostic: &mut pi_types::AssistantMessageDiagnostic) {
        if self.is_empty() {
            return;
        }
        let redactor = self.redactor();
        if let Some(error) = diagnostic.error.as_mut() {
            if let Cow::Owned(clean) = redactor.text(&error.message) {
                error.message = clean;
            }
        }
        if let Some(details) = diagnostic.details.as_mut() {
            let mut value = Value::Object(std::mem::take(details));
            redactor.value(&mut value);
            if let Value::Object(clean) = value {
                *details = clean;
            }
        }
    }

    /// A matcher for these credentials.
    pub(crate) fn redactor(&self) -> Redactor {
        Redactor::new(self.0.iter().map(String::as_str))
    }

    /// `text` with the credentials and any `Bearer` token redacted.
    pub(crate) fn clean(&self, text: String) -> String {
        let bearer = BEARER.as_ref().is_some_and(|bearer| bearer.is_match(&text));
        if !bearer && (self.is_empty() || !self.redactor().hits(text.as_bytes())) {
            return text;
        }
        let redactor = self.redactor();
        let text = redactor.text(&text).into_owned();
        match BEARER.as_ref() {
            Some(bearer) => bearer.replace_all(&text, format!("${{1}}${{2}}{REDACTED}").as_str()).into_owned(),
            None => text,
        }
    }
}

/// The credentials of an `Authorization` value: what follows the scheme (`Bearer`, `Basic`),
/// or each parameter's value (SigV4's `Credential=<key id>/...`, `Signature=...`).
fn authorization_credentials(value: &str) -> impl Iterator<Item = &str> {
    let rest = value.split_once(' ').map_or(value, |(_, rest)| rest.trim());
    let params = rest.contains('=') && rest.contains(',');
    let whole = (!params).then_some(rest);
    let values = rest
        .split(',')
        .filter(move |_| params)
        .filter_map(|param| param.split_once('='))
        .filter(|(name, _)| !name.trim().eq_ignore_ascii_case("SignedHeaders"))
        .map(|(_, value)| value.split('/').next().unwrap_or(value).trim());
    whole.into_iter().chain(values)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const KEY: &str = "sk-live-0123456789abcdef\"/+x";

    /// A recovery's diagnostic that quotes the server (a WebSocket close reason, a gateway's
    /// error page) loses the key in its text and its details alike.
    #[test]
    fn a_diagnostic_is_cleaned_in_text_and_details() {
        let secrets = Secrets(vec![KEY.to_owned()]);
        let mut details = pi_types::JsonObject::new();
        details.insert("body".into(), serde_json::json!({"echo": format!("key={KEY}")}));
        let mut diagnostic = pi_types::AssistantMessageDiagnostic {
            kind: "provider_transport_failure".into(),
            error: Some(pi_types::DiagnosticErrorInfo { message: format!("closed: {KEY}"), ..Default::default() }),
            details: Some(details),
            ..Default::default()
        };
        secrets.clean_diagnostic(&mut diagnostic);
        let text = serde_json::to_string(&diagnostic).unwrap();
        assert!(!text.contains("sk-live"), "{text}");
        assert_eq!(diagnostic.error.map(|e| e.message).as_deref(), Some("closed: <redacted>"));
    }

    #[test]
    fn every_spelling_and_fragment_is_redacted() {
        let redactor = Redactor::new([KEY, "short"]);
        let json = serde_json::to_string(KEY).unwrap();
        let url: String = form_urlencoded::byte_serialize(KEY.as_bytes()).collect();
        for text in [format!("raw {KEY} end"), format!("json {json} end"), format!("url ?key={url}&x")] {
            let clean = redactor.text(&text);
            assert!(clean.contains(REDACTED), "{clean}");
            assert!(!clean.contains("0123456789ab"), "{clean}");
        }
        // A prefix left by a cut, and a key split over two fields.
        let cut = redactor.text("body ... sk-live-01234567");
        assert_eq!(cut, format!("body ... {REDACTED}"));
        let split = redactor.text(r#"{"a":"sk-live-0123456","b":"789abcdef\"/+x"}"#);
        assert_eq!(split, format!(r#"{{"a":"{REDACTED}","b":"{REDACTED}"}}"#));
        // Short secrets and ordinary text are left alone.
        assert!(matches!(redactor.text("short and sweet"), Cow::Borrowed(_)));
    }

    #[test]
    fn bearer_tokens_are_redacted_and_errors_bounded() {
        let redactor = Redactor::new([]);
        let text = redactor.error_text("401: {\"authorization\": \"Bearer ya29.a0AfH6SM-token\"} bearer%20abcdefghij");
        assert_eq!(text, format!("401: {{\"authorization\": \"Bearer {REDACTED}\"}} bearer%20{REDACTED}"));
        assert!(redactor.error_text(&"x".repeat(1 << 20)).len() < 5000);
    }

    #[test]
    fn json_values_are_redacted_throughout() {
        let redactor = Redactor::new([KEY]);
        let mut value = serde_json::json!({"type": "text_delta", "delta": format!("a{KEY}b"), "n": [KEY]});
        redactor.value(&mut value);
        assert_eq!(value, serde_json::json!({"type": "text_delta", "delta": format!("a{REDACTED}b"), "n": [REDACTED]}));
    }
}
