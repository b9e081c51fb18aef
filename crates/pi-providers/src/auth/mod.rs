//! Credentials and sign-ins, as pi-ai's `auth` module has them, and the ChatGPT (Codex)
//! credentials with their device-code login ([`codex`], [`codex_login`]).
//!
//! * [`Credential`]: one per provider, an API key ([`ApiKeyCredential`]) or an OAuth sign-in
//!   ([`OAuthCredential`]), in the JSON shape of the reference's `auth.json`
//!   (`{"anthropic": {"type": "oauth", "access", "refresh", "expires", ...}}`). Every token is a
//!   [`Secret`], whose `Debug` and `Display` print `<redacted>`.
//! * [`CredentialStore`]: where credentials live. [`FileCredentialStore`] is the default (an
//!   owner-only file, replaced atomically); [`InMemoryCredentialStore`] is the reference's default.
//! * [`Authenticator`]: `get_auth` / `check_auth` / `available` / `login` / `logout` over a store
//!   and the OAuth flows ([`OAuthFlow`]), refreshing a token that expires within five minutes
//!   under the store's lock, so concurrent requests refresh once and a failed refresh keeps the
//!   old credential.
//! * The flows ([`builtin_flows`]): [`anthropic`] (Claude Pro/Max), [`openrouter`] (PKCE to a
//!   key), [`openai_codex`] (ChatGPT Plus/Pro: browser, or the device-code sign-in of
//!   [`codex_login`]), [`openai_chatgpt`] (Sign in with ChatGPT for `openai`), [`copilot`]
//!   (GitHub Copilot: device code, token exchange, per-account base URL), [`kimi`] (Kimi Code),
//!   [`meta`] (Meta Model API), [`xai`] (SuperGrok / X Premium) and [`radius`] (a Radius
//!   gateway: browser or device code). The device-code flows share one RFC 8628 poller.
//!
//! No token is ever part of an error text, a `Debug` output or a log line.

mod authenticator;
mod callback;
mod credential;
mod device;
mod interaction;
mod pkce;
pub(crate) mod request;
mod store;
pub(crate) mod web;

pub mod anthropic;
pub mod codex;
pub mod codex_login;
pub mod copilot;
pub mod kimi;
pub mod meta;
pub mod openai_chatgpt;
pub mod openai_codex;
pub mod openrouter;
pub mod radius;
pub mod xai;

pub use authenticator::{AuthCheck, AuthResult, Authenticator, ModelAuth, OAuthFlow, MIN_OAUTH_VALIDITY_MS};
pub use callback::{CallbackServer, CallbackServerOptions};
pub use credential::{ApiKeyCredential, Credential, CredentialInfo, CredentialKind, OAuthCredential, Secret};
pub use interaction::{AuthEvent, AuthInteraction, AuthPrompt};
pub use pkce::Pkce;
pub use store::{CredentialStore, FileCredentialStore, InMemoryCredentialStore, ModifyFn};

/// Why a credential operation failed. No variant's text contains a token.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The store could not be read or written (the reference's `ModelsError` code `auth`).
    #[error("Credential store {action} failed for {provider}: {reason}")]
    Store {
        /// `read`, `write`, `lock`, `delete` or `list`.
        action: &'static str,
        /// The provider id (or `*` for the whole store).
        provider: String,
        /// What went wrong.
        reason: String,
    },
    /// A refresh failed (code `oauth`); the stored credential is unchanged.
    #[error("OAuth refresh failed for {provider}: {reason}")]
    Refresh {
        /// The provider id.
        provider: String,
        /// What went wrong.
        reason: String,
    },
    /// A sign-in failed or was cancelled.
    #[error("{0}")]
    Login(String),
    /// The provider has no sign-in of the asked kind.
    #[error("{0}")]
    Unsupported(String),
}

/// The providers this crate signs in to, with their flows: `anthropic`, `github-copilot`,
/// `kimi-coding`, `meta`, `openai` (Sign in with ChatGPT), `openai-codex`, `openrouter`,
/// `radius` (the default gateway) and `xai`.
pub fn builtin_flows() -> Vec<(&'static str, std::sync::Arc<dyn OAuthFlow>)> {
    vec![
        ("anthropic", anthropic::flow()),
        ("github-copilot", copilot::flow()),
        ("kimi-coding", kimi::flow()),
        ("meta", meta::flow()),
        ("openai", openai_chatgpt::flow()),
        ("openai-codex", openai_codex::flow()),
        ("openrouter", openrouter::flow()),
        ("radius", radius::flow()),
        ("xai", xai::flow()),
    ]
}
