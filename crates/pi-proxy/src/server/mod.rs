//! The proxy server (feature `server`): `POST /api/stream`, `POST /messages` (also
//! `/v1/messages`: pi-ai's `pi-messages` API, see [`pi_providers::pi_messages`]) and
//! `GET /healthz`.
//!
//! Protocol: see [`crate::wire`]; the pi-messages routes take the model by id (`provider/id`
//! when several providers serve it) and answer in that API's event and refusal shapes. Each request is checked in this order, and refused with a
//! JSON body `{"error": "…"}`:
//! 1. `Authorization: Bearer <token>` against the configured tokens, compared in constant
//!    time (401);
//! 2. `Content-Type: application/json` (415);
//! 3. a free stream slot, in total and for the token (503 with `retry-after`);
//! 4. the body: at most [`Limits::max_body_bytes`] (413), read within
//!    [`Limits::body_read_timeout`] (408), valid JSON of the right shape (400 naming the field);
//! 5. the model: resolved by provider and id in the server's own [`Models`] registry; the
//!    body's `baseUrl`, `api` and `headers` must agree with the server's model (400), so the
//!    server's keys only ever go where the server's configuration points;
//! 6. `options.headers` and `options.samplingParams` names against allow-lists (400);
//!    `authorization`, `proxy-authorization`, `x-api-key`, `x-goog-api-key`, `cookie` and
//!    `host` are never accepted.
//!
//! The upstream stream runs inside the response body: when the client disconnects, hyper
//! drops the body, which cancels the upstream request at once. A stream that runs past
//! [`Limits::upstream_timeout`] ends with an `error` event. Each request is one `tracing`
//! span `proxy_request` with the token id (never the token), provider, model, HTTP status,
//! outcome and duration; no message content is logged. The access log is one event per
//! request at target [`ACCESS_TARGET`] (method, path, status, duration, token id).
//!
//! The server keeps no state between requests, so it scales by adding replicas behind any
//! HTTP load balancer (docs/proxy.md).

mod access_log;
mod config;
mod handler;
mod listener;
mod validate;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use pi_providers::Models;

pub use access_log::ACCESS_TARGET;
pub use config::{CustomProvider, FileConfig};
pub use listener::serve;

/// A bearer token and the id it is logged under.
#[derive(Clone)]
pub struct ProxyToken {
    /// Name used in logs and per-token limits.
    pub id: String,
    /// The secret the client sends.
    pub secret: String,
}

impl fmt::Debug for ProxyToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyToken").field("id", &self.id).field("secret", &"<redacted>").finish()
    }
}

impl ProxyToken {
    /// A token.
    pub fn new(id: impl Into<String>, secret: impl Into<String>) -> Self {
        Self { id: id.into(), secret: secret.into() }
    }
}

/// Resource limits of the server. Every default is finite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body (default 8 MiB); larger bodies get 413.
    pub max_body_bytes: usize,
    /// Time to read the request body (default 30 s); slower bodies get 408.
    pub body_read_timeout: Duration,
    /// Time to read the request headers of a connection (default 30 s).
    pub header_read_timeout: Duration,
    /// Streams running at once (default 1024); more get 503.
    pub max_streams: usize,
    /// Streams running at once per token (default 64); more get 503.
    pub max_streams_per_token: usize,
    /// Open connections (default 4096); more are closed on accept.
    pub max_connections: usize,
    /// Longest upstream stream, start to end (default 10 min).
    pub upstream_timeout: Duration,
    /// Upstream time to response headers (default 60 s).
    pub upstream_headers_timeout: Duration,
    /// Upstream silence between chunks (default 120 s).
    pub upstream_idle_timeout: Duration,
    /// SSE comment sent when a stream is quiet this long (default 15 s), keeping load
    /// balancers from closing it and noticing closed clients.
    pub keepalive_interval: Duration,
    /// How long running streams may finish after shutdown starts (default 30 s).
    pub shutdown_grace: Duration,
    /// `retry-after` seconds of a 503 (default 1).
    pub retry_after_secs: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 8 * 1024 * 1024,
            body_read_timeout: Duration::from_secs(30),
            header_read_timeout: Duration::from_secs(30),
            max_streams: 1024,
            max_streams_per_token: 64,
            max_connections: 4096,
            upstream_timeout: Duration::from_secs(600),
            upstream_headers_timeout: Duration::from_secs(60),
            upstream_idle_timeout: Duration::from_secs(120),
            keepalive_interval: Duration::from_secs(15),
            shutdown_grace: Duration::from_secs(30),
            retry_after_secs: 1,
        }
    }
}

/// Request headers a client may never set, whatever the allow-list says.
pub const FORBIDDEN_HEADERS: [&str; 6] =
    ["authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "cookie", "host"];

/// `samplingParams` keys allowed by default: sampling knobs only, nothing that could change
/// the model, the messages or the billing of a request.
pub const DEFAULT_SAMPLING_PARAMS: [&str; 9] =
    ["top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty", "seed", "stop", "n"];

/// Everything the server needs: the registry holding the keys, the tokens and the limits.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Providers and models served, with their keys.
    pub models: Arc<Models>,
    /// Accepted bearer tokens.
    pub tokens: Vec<ProxyToken>,
    /// Resource limits.
    pub limits: Limits,
    /// Client `options.headers` names that are passed on (lower case; default none).
    pub allowed_headers: Vec<String>,
    /// `options.samplingParams` keys that are passed on (default [`DEFAULT_SAMPLING_PARAMS`]).
    pub allowed_sampling_params: Vec<String>,
}

impl ServerConfig {
    /// A configuration serving `models` to the holders of `tokens`, with default limits.
    pub fn new(models: Arc<Models>, tokens: Vec<ProxyToken>) -> Self {
        Self {
            models,
            tokens,
            limits: Limits::default(),
            allowed_headers: Vec::new(),
            allowed_sampling_params: DEFAULT_SAMPLING_PARAMS.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

/// The axum router of the server (for embedding in an application; [`serve`] runs it with
/// connection limits and graceful shutdown).
pub fn router(config: ServerConfig) -> axum::Router {
    handler::router(config, tokio_util::sync::CancellationToken::new())
}
