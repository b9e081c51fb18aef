//! The stored credential types, field for field the reference's `auth.json` entries.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A token or key. `Debug` and `Display` print `<redacted>`; [`Secret::expose`] is the only way
/// to the text, so every place a token leaves the process is greppable.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wrap a token.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The token itself, for a request header or the store file.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the token is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A stored API key; `env` holds provider-scoped settings (Cloudflare account and gateway ids).
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct ApiKeyCredential {
    /// The key; absent when only `env` is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<Secret>,
    /// Provider-scoped environment values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
}

/// A stored OAuth sign-in. `extra` keeps the provider's other fields (`accountId`,
/// `enterpriseUrl`, `availableModelIds`, ...) as they were written.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct OAuthCredential {
    /// The refresh token (empty for OpenRouter, whose key does not expire).
    pub refresh: Secret,
    /// The access token (or key) sent with requests.
    pub access: Secret,
    /// When `access` expires, Unix milliseconds.
    pub expires: u64,
    /// The provider's other fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl fmt::Debug for OAuthCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `extra` may hold ids a provider considers private: its names only.
        f.debug_struct("OAuthCredential")
            .field("refresh", &self.refresh)
            .field("access", &self.access)
            .field("expires", &self.expires)
            .field("extra", &self.extra.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl OAuthCredential {
    /// A credential without extra fields.
    pub fn new(access: impl Into<String>, refresh: impl Into<String>, expires: u64) -> Self {
        Self { refresh: Secret::new(refresh), access: Secret::new(access), expires, extra: Map::new() }
    }

    /// Whether less than `min_validity_ms` is left at `now_ms`.
    pub fn expires_within(&self, now_ms: u64, min_validity_ms: u64) -> bool {
        now_ms.saturating_add(min_validity_ms) >= self.expires
    }

    /// A string field of `extra`.
    pub fn extra_str(&self, key: &str) -> Option<&str> {
        self.extra.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
    }
}

/// One credential per provider, tagged by `type` as in the reference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Credential {
    /// `{"type": "api_key", "key", "env"}`.
    #[serde(rename = "api_key")]
    ApiKey(ApiKeyCredential),
    /// `{"type": "oauth", "access", "refresh", "expires", ...}`.
    #[serde(rename = "oauth")]
    OAuth(OAuthCredential),
}

impl Credential {
    /// Which kind this is.
    pub fn kind(&self) -> CredentialKind {
        match self {
            Self::ApiKey(_) => CredentialKind::ApiKey,
            Self::OAuth(_) => CredentialKind::OAuth,
        }
    }
}

/// The kind of a credential (the reference's `type` tag).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CredentialKind {
    /// An API key.
    #[serde(rename = "api_key")]
    ApiKey,
    /// An OAuth sign-in.
    #[serde(rename = "oauth")]
    OAuth,
}

impl CredentialKind {
    /// The reference's tag: `api_key` or `oauth`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ApiKey => "api_key",
            Self::OAuth => "oauth",
        }
    }
}

/// What a store lists: a provider and the kind of its credential, no secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialInfo {
    /// The provider id.
    pub provider_id: String,
    /// The credential's kind.
    pub kind: CredentialKind,
}
