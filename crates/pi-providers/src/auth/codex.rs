//! ChatGPT-subscription (OpenAI Codex) OAuth tokens: reading the account id out of an access
//! token, and a token store that refreshes an expiring token before a request.
//!
//! The store is the reference's `auth.json` (what `pi-ai login openai-codex` writes): a JSON
//! object keyed by provider id, the `openai-codex` entry being
//! `{"type": "oauth", "access", "refresh", "expires", "accountId"}` with `expires` in Unix
//! milliseconds. A token with less than five minutes left is refreshed by a form POST of
//! `grant_type=refresh_token`, the refresh token and the Codex client id to
//! `https://auth.openai.com/oauth/token`; the answer's `access_token`, `refresh_token` and
//! `expires_in` (seconds) replace the entry, which is written back (mode 0600 on Unix) before
//! the new token is used. [`CodexTokenStore::resolver`] plugs the store into the registry as an
//! [`Auth::Resolver`](crate::registry::Auth::Resolver); signing in is
//! [`codex_login`](crate::auth::codex_login).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pi_types::{BoxError, Model};
use serde_json::{Map, Value};

use crate::failure::KeyResolver;

/// The OAuth client id of the Codex CLI (public; pi-ai logs in as it).
pub const CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";
/// The token endpoint.
pub const TOKEN_URL: &str = "https://auth.openai.com/oauth/token";
/// The JWT claim holding the ChatGPT account.
pub const JWT_CLAIM_PATH: &str = "https://api.openai.com/auth";
/// The provider id the credential is stored under.
pub const PROVIDER_ID: &str = "openai-codex";
/// A token with less time than this left is refreshed first (the reference's five minutes).
pub const MIN_VALIDITY_MS: u64 = 5 * 60 * 1000;
/// Longest wait for the token endpoint.
pub const REFRESH_TIMEOUT_MS: u64 = 15_000;

/// Decode a base64 text as `atob` does (standard alphabet, whitespace ignored, padding
/// optional), also accepting the URL-safe alphabet JWTs are written in.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let mut bits: u32 = 0;
    let mut count = 0u32;
    let mut out = Vec::new();
    let cleaned: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let body = cleaned.strip_suffix(b"==").or_else(|| cleaned.strip_suffix(b"=")).unwrap_or(&cleaned);
    if body.len() % 4 == 1 {
        return None;
    }
    for byte in body {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(value);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push(((bits >> count) & 0xff) as u8);
        }
    }
    Some(out)
}

/// The payload of a JWT (not verified: the token is only read for its claims).
pub fn decode_jwt_payload(token: &str) -> Option<Value> {
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    let bytes = decode_base64(payload)?;
    serde_json::from_slice(&bytes).ok()
}

/// The ChatGPT account id in an access token's `https://api.openai.com/auth` claim.
pub fn account_id(token: &str) -> Option<String> {
    decode_jwt_payload(token)?
        .get(JWT_CLAIM_PATH)?
        .get("chatgpt_account_id")?
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// A stored ChatGPT OAuth credential. `Debug` prints neither token.
#[derive(Clone, PartialEq, Eq)]
pub struct CodexCredential {
    /// The access token (a JWT), sent as the bearer key.
    pub access: String,
    /// The refresh token.
    pub refresh: String,
    /// When the access token expires, Unix milliseconds.
    pub expires: u64,
    /// The account id from the access token.
    pub account_id: String,
}

impl fmt::Debug for CodexCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CodexCredential")
            .field("access", &"<redacted>")
            .field("refresh", &"<redacted>")
            .field("expires", &self.expires)
            .field("account_id", &self.account_id)
            .finish()
    }
}

impl CodexCredential {
    fn from_json(value: &Value) -> Option<Self> {
        if value.get("type").and_then(Value::as_str) != Some("oauth") {
            return None;
        }
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
        Some(Self {
            access: text("access")?,
            refresh: text("refresh")?,
            expires: value.get("expires").and_then(Value::as_f64).map_or(0, |e| e.max(0.0) as u64),
            account_id: text("accountId").unwrap_or_default(),
        })
    }

    fn to_json(&self) -> Value {
        serde_json::json!({
            "type": "oauth",
            "access": self.access,
            "refresh": self.refresh,
            "expires": self.expires,
            "accountId": self.account_id,
        })
    }

    /// Whether the token has less than `min_validity_ms` left at `now_ms`.
    pub fn expires_soon(&self, now_ms: u64, min_validity_ms: u64) -> bool {
        now_ms.saturating_add(min_validity_ms) >= self.expires
    }
}

/// Why a token could not be had. The text never contains a token.
#[derive(Debug, thiserror::Error)]
pub enum CodexAuthError {
    /// The store could not be read or written.
    #[error("Credential store {action} failed for openai-codex: {reason}")]
    Store {
        /// `read` or `write`.
        action: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// The refresh failed.
    #[error("OAuth refresh failed for openai-codex: {0}")]
    Refresh(String),
}

/// The `openai-codex` credential in an `auth.json` file, refreshed when it is about to expire.
///
/// Refreshes in one process are serialized and re-check the file first, so concurrent
/// requests refresh once. (The reference's in-memory store serializes the same way; neither
/// locks against another process.)
pub struct CodexTokenStore {
    path: PathBuf,
    token_url: String,
    min_validity_ms: u64,
    lock: tokio::sync::Mutex<()>,
    http_client: Option<reqwest::Client>,
}

impl fmt::Debug for CodexTokenStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CodexTokenStore").field("path", &self.path).field("token_url", &self.token_url).finish()
    }
}

/// A form POST to an OAuth token endpoint (`operation`: `refresh` or `exchange`, as the
/// reference words its errors); the credential it grants, with the account id from the token.
pub(crate) async fn token_grant(
    client: &reqwest::Client,
    url: &str,
    form: &[(&str, &str)],
    operation: &str,
) -> Result<CodexCredential, String> {
    let fail = |reason: String| format!("OpenAI Codex token {operation} error: {reason}");
    let timed_out = || fail("The operation was aborted due to timeout".into());
    let send = client
        .post(url)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(crate::api::support::form_encode(form))
        .send();
    let response = match tokio::time::timeout(Duration::from_millis(REFRESH_TIMEOUT_MS), send).await {
        Err(_) => return Err(timed_out()),
        Ok(Err(e)) => return Err(fail(crate::transport::http::deepest_cause(&e))),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    let read = crate::transport::http::read_to_cap(response, crate::transport::http::MAX_TOKEN_BODY_BYTES);
    let bytes = match tokio::time::timeout(Duration::from_millis(REFRESH_TIMEOUT_MS), read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => return Err(fail(crate::transport::http::deepest_cause(&e))),
        Err(_) => return Err(timed_out()),
    };
    if !status.is_success() {
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4000)]).into_owned();
        let text = if text.is_empty() { status.canonical_reason().unwrap_or("").to_owned() } else { text };
        return Err(format!("OpenAI Codex token {operation} failed ({}): {text}", status.as_u16()));
    }
    let json: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("OpenAI Codex token {operation} response is not JSON: {e}"))?;
    let text = |key: &str| json.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    let expires_in = json.get("expires_in").and_then(Value::as_f64);
    let (Some(access), Some(refresh), Some(expires_in)) = (text("access_token"), text("refresh_token"), expires_in)
    else {
        // The reference prints the whole answer here, tokens included; only the names are
        // printed here.
        let missing: Vec<&str> = [
            ("access_token", text("access_token").is_none()),
            ("refresh_token", text("refresh_token").is_none()),
            ("expires_in", expires_in.is_none()),
        ]
        .into_iter()
        .filter_map(|(name, missing)| missing.then_some(name))
        .collect();
        return Err(format!("OpenAI Codex token {operation} response missing fields: {}", missing.join(", ")));
    };
    let Some(account_id) = account_id(&access) else {
        return Err("Failed to extract accountId from token".into());
    };
    let expires = (now_ms() as f64 + expires_in * 1000.0).max(0.0) as u64;
    Ok(CodexCredential { access, refresh, expires, account_id })
}

/// Where `pi` keeps OAuth credentials: `$PI_AUTH_FILE`, else `~/.pi/agent/auth.json` (the file
/// the pi coding agent signs in to, in the same format), else `auth.json` in the working
/// directory when no home directory is known.
pub fn default_auth_path() -> PathBuf {
    if let Some(path) = std::env::var_os("PI_AUTH_FILE").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Path::new(&home).join(".pi").join("agent").join("auth.json"),
        None => PathBuf::from("auth.json"),
    }
}

fn now_ms() -> u64 {
    pi_types::now_ms()
}

impl CodexTokenStore {
    /// A store over the `auth.json` at `path`, refreshing through [`TOKEN_URL`].
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            token_url: TOKEN_URL.to_owned(),
            min_validity_ms: MIN_VALIDITY_MS,
            lock: tokio::sync::Mutex::new(()),
            http_client: None,
        }
    }

    /// Refresh through another token endpoint (tests, proxies).
    pub fn with_token_url(mut self, url: impl Into<String>) -> Self {
        self.token_url = url.into();
        self
    }

    /// Refresh with `client`. Without one, a refresh made while the registry resolves a
    /// request's key uses that request's client (see [`crate::transport::client`]), else the default.
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    /// Refresh tokens with less than this much time left (at least the five-minute default).
    pub fn with_min_validity_ms(mut self, ms: u64) -> Self {
        self.min_validity_ms = ms.max(MIN_VALIDITY_MS);
        self
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read_file(&self) -> Result<Map<String, Value>, CodexAuthError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => Ok(serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
            Err(e) => Err(CodexAuthError::Store { action: "read", reason: e.to_string() }),
        }
    }

    /// The stored credential, if any.
    pub fn read(&self) -> Result<Option<CodexCredential>, CodexAuthError> {
        Ok(self.read_file()?.get(PROVIDER_ID).and_then(CodexCredential::from_json))
    }

    /// Store a credential (other providers' entries are kept).
    pub fn write(&self, credential: &CodexCredential) -> Result<(), CodexAuthError> {
        let mut all = self.read_file()?;
        all.insert(PROVIDER_ID.to_owned(), credential.to_json());
        let text = serde_json::to_string_pretty(&Value::Object(all))
            .map_err(|e| CodexAuthError::Store { action: "write", reason: e.to_string() })?;
        let fail = |e: std::io::Error| CodexAuthError::Store { action: "write", reason: e.to_string() };
        let mut temp = self.path.clone().into_os_string();
        temp.push(".tmp");
        let temp = PathBuf::from(temp);
        {
            let mut open = std::fs::OpenOptions::new();
            open.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                open.mode(0o600);
            }
            let mut file = open.open(&temp).map_err(fail)?;
            std::io::Write::write_all(&mut file, text.as_bytes()).map_err(fail)?;
            file.sync_all().map_err(fail)?;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o600)).map_err(fail)?;
        }
        std::fs::rename(&temp, &self.path).map_err(fail)
    }

    /// A valid access token: the stored one, refreshed first when it expires within the
    /// minimum validity. `Ok(None)` when nothing is stored.
    pub async fn access_token(&self) -> Result<Option<String>, CodexAuthError> {
        let Some(credential) = self.read()? else { return Ok(None) };
        if !credential.expires_soon(now_ms(), self.min_validity_ms) {
            return Ok(Some(credential.access));
        }
        let _guard = self.lock.lock().await;
        // Another request may have refreshed while this one waited.
        let Some(current) = self.read()? else { return Ok(None) };
        if !current.expires_soon(now_ms(), self.min_validity_ms) {
            return Ok(Some(current.access));
        }
        let fresh = self.refresh(&current.refresh).await.map_err(CodexAuthError::Refresh)?;
        self.write(&fresh)?;
        Ok(Some(fresh.access))
    }

    /// Exchange a refresh token for a new credential (not stored).
    pub async fn refresh(&self, refresh_token: &str) -> Result<CodexCredential, String> {
        let form = [("grant_type", "refresh_token"), ("refresh_token", refresh_token), ("client_id", CLIENT_ID)];
        let client = match &self.http_client {
            Some(client) => client.clone(),
            None => crate::transport::client::for_token_request()?,
        };
        token_grant(&client, &self.token_url, &form, "refresh").await
    }

    /// The store as a registry key resolver (`Auth::Resolver`).
    pub fn resolver(self: Arc<Self>) -> KeyResolver {
        Arc::new(move |_model: &Model| {
            let store = Arc::clone(&self);
            Box::pin(async move { store.access_token().await.map_err(|e| Box::new(e) as BoxError) })
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn account_id_is_read_from_standard_and_url_safe_payloads() {
        // {"https://api.openai.com/auth":{"chatgpt_account_id":"acc-1"}}
        let payload = "eyJodHRwczovL2FwaS5vcGVuYWkuY29tL2F1dGgiOnsiY2hhdGdwdF9hY2NvdW50X2lkIjoiYWNjLTEifX0";
        assert_eq!(account_id(&format!("h.{payload}.s")).as_deref(), Some("acc-1"));
        assert_eq!(account_id(&format!("h.{payload}==.s")).as_deref(), Some("acc-1"));
        assert_eq!(account_id("not-a-jwt"), None);
        assert_eq!(account_id(&format!("h.{payload}.s.extra")), None);
        assert_eq!(account_id("h.e30.s"), None);
        assert_eq!(decode_base64("-_8"), Some(vec![0xfb, 0xff]));
        assert_eq!(decode_base64("+/8="), Some(vec![0xfb, 0xff]));
        assert_eq!(decode_base64("abcde"), None);
    }

    #[test]
    fn form_encoding_matches_url_search_params() {
        assert_eq!(crate::api::support::form_encode(&[("a b", "x/y+z~*")]), "a+b=x%2Fy%2Bz%7E*");
    }

    #[test]
    fn debug_redacts_tokens() {
        let credential = CodexCredential {
            access: "secret-a".into(),
            refresh: "secret-r".into(),
            expires: 1,
            account_id: "acc".into(),
        };
        let text = format!("{credential:?}");
        assert!(!text.contains("secret"), "{text}");
    }
}
