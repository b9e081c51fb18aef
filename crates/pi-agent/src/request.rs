//! An agent's own HTTP settings: the client its requests go through, extra headers, the
//! time limits and where its key comes from.
//!
//! Every request of the agent's runs gets them in its [`StreamOptions`]; the built-in
//! providers honour each one (the client through [`StreamOptions::http_client`], a
//! `pi_providers::transport::client::handle` of a `reqwest::Client`). Unset, a request has the
//! provider's defaults: the process-wide client, the 300 s limits, the provider's key.
//!
//! The key: a [`KeySource`] sets [`StreamOptions::api_key`] when a run starts (an environment
//! variable is read then); the [`get_api_key`](AgentOptions::get_api_key) hook, when it returns
//! a key, still wins, per request.

use std::fmt;

use pi_types::{HttpClientHandle, RequestHeaders, StreamOptions};

use crate::options::AgentOptions;

/// Where an agent's API key comes from (see [`AgentOptions::with_key_source`]).
#[derive(Clone, PartialEq, Eq)]
pub enum KeySource {
    /// This key.
    Key(String),
    /// The value of this environment variable, read when each run starts (no key while it is
    /// unset or empty).
    Env(String),
}

impl fmt::Debug for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Key(_) => f.write_str("Key(<redacted>)"),
            Self::Env(name) => f.debug_tuple("Env").field(name).finish(),
        }
    }
}

impl KeySource {
    /// The key now.
    fn resolve(&self) -> Option<String> {
        match self {
            Self::Key(key) => Some(key.clone()),
            Self::Env(name) => std::env::var(name).ok().filter(|key| !key.is_empty()),
        }
    }
}

/// The HTTP settings of an agent's requests ([`AgentOptions::request`]); `None` and empty
/// fields keep the provider's defaults.
#[derive(Clone, Debug, Default)]
pub struct RequestSettings {
    /// The client of every request ([`StreamOptions::http_client`]).
    pub http_client: Option<HttpClientHandle>,
    /// Headers added to every request, over the provider's ([`StreamOptions::headers`];
    /// `Debug` shows their names only).
    pub headers: RequestHeaders,
    /// Time-to-headers limit per attempt, ms ([`StreamOptions::timeout_ms`]; 0 disables).
    pub timeout_ms: Option<u64>,
    /// Limit on the silence between body chunks, ms ([`StreamOptions::idle_timeout_ms`]; 0
    /// disables).
    pub idle_timeout_ms: Option<u64>,
    /// The agent's key ([`StreamOptions::api_key`]).
    pub key: Option<KeySource>,
}

impl RequestSettings {
    /// Whether nothing is set.
    pub(crate) fn is_empty(&self) -> bool {
        self.http_client.is_none()
            && self.headers.is_empty()
            && self.timeout_ms.is_none()
            && self.idle_timeout_ms.is_none()
            && self.key.is_none()
    }

    /// Put these settings into the options of a run's requests.
    pub(crate) fn apply(&self, options: &mut StreamOptions) {
        if let Some(client) = &self.http_client {
            options.http_client = Some(client.clone());
        }
        if !self.headers.is_empty() {
            options.headers.extend(self.headers.iter().map(|(name, value)| (name.clone(), value.clone())));
        }
        options.timeout_ms = self.timeout_ms.or(options.timeout_ms);
        options.idle_timeout_ms = self.idle_timeout_ms.or(options.idle_timeout_ms);
        if let Some(key) = self.key.as_ref().and_then(KeySource::resolve) {
            options.api_key = Some(key);
        }
    }
}

impl AgentOptions {
    /// Send every request through `client`, e.g. `pi_providers::transport::client::handle(reqwest_client)`
    /// (a client of `pi_providers::transport::client::builder()` keeps its safe defaults: no redirects, no
    /// environment proxy).
    pub fn with_http_client(mut self, client: HttpClientHandle) -> Self {
        self.request.http_client = Some(client);
        self
    }

    /// Add a header to every request (`None` removes the provider's header of that name).
    pub fn with_request_header(mut self, name: impl Into<String>, value: Option<String>) -> Self {
        self.request.headers.insert(name, value);
        self
    }

    /// The time limits of every request, in ms: until the response headers (per attempt) and
    /// between body chunks (`None` keeps the default, 0 disables).
    pub fn with_timeouts(mut self, headers_ms: Option<u64>, idle_ms: Option<u64>) -> Self {
        self.request.timeout_ms = headers_ms;
        self.request.idle_timeout_ms = idle_ms;
        self
    }

    /// Take the agent's key from `source`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use pi_agent::{AgentOptions, KeySource};
    /// # let faux = pi_providers::faux::FauxProvider::default();
    /// let options = AgentOptions::new(Arc::new(faux))
    ///     .with_key_source(KeySource::Env("MY_SERVER_KEY".into()))
    ///     .with_request_header("x-team", Some("search".into()))
    ///     .with_timeouts(Some(30_000), Some(60_000))
    ///     .with_http_client(pi_providers::transport::client::handle(pi_providers::transport::client::builder().build().unwrap()));
    /// assert_eq!(options.request.timeout_ms, Some(30_000));
    /// assert!(!format!("{:?}", KeySource::Key("sk-secret".into())).contains("sk-secret"));
    /// ```
    pub fn with_key_source(mut self, source: KeySource) -> Self {
        self.request.key = Some(source);
        self
    }
}
