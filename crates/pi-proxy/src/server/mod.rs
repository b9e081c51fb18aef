//! The proxy server (feature `server`): `POST /api/stream`, `POST /messages` (also
//! `/v1/messages`: pi-ai's `pi-messages` API, see [`pi_providers::api::pi_messages`]), `GET
//! /api/models` (the served models, [`crate::wire::ModelList`]) and `GET /healthz`.
//!
//! Protocol: see [`crate::wire`]; the pi-messages routes take the model by id (`provider/id`
//! when several providers serve it) and answer in that API's event and refusal shapes. Each request is checked in this order, and refused with a
//! JSON body `{"error": "…"}`:
//! 1. `Authorization: Bearer <token>` against the configured tokens, compared in constant
//!    time (401);
//! 2. `Content-Type: application/json` (415);
//! 3. the body: at most [`Limits::max_body_bytes`] (413), read within
//!    [`Limits::body_read_timeout`] (408) while room is left in
//!    [`Limits::max_body_bytes_in_flight`] (503), valid JSON of the right shape (400 naming the
//!    field); large bodies are parsed on the blocking pool, never on the async workers;
//! 4. the model: resolved by provider and id in the server's own [`Models`] registry; the
//!    body's `baseUrl`, `api` and `headers` must agree with the server's model (400), so the
//!    server's keys only ever go where the server's configuration points;
//! 5. `options.headers` and `options.samplingParams` names against allow-lists (400);
//!    `authorization`, `proxy-authorization`, `x-api-key`, `x-goog-api-key`, `cookie` and
//!    `host` are never accepted;
//! 6. a free stream slot, in total and for the token (503 with `retry-after`), taken only
//!    now, so slow or invalid bodies never hold one;
//! 7. the token's budgets, when set: [`Limits::requests_per_minute`] and
//!    [`Limits::tokens_per_day`] (429 with `retry-after`).
//!
//! `maxTokens` is cut to the model's own `maxTokens` (and to what is left of a daily budget).
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
mod body;
mod budget;
mod config;
mod handler;
mod idle;
mod listener;
mod models;
mod redact;
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
    /// Time from the request head to the whole body (default 10 s); slower bodies get 408.
    /// Separate from, and much shorter than, the stream's [`Limits::upstream_timeout`]: a body
    /// is read before the request takes a stream slot.
    pub body_read_timeout: Duration,
    /// Bytes of request bodies being read and checked at once, all requests together (default
    /// 64 MiB, at least [`Limits::max_body_bytes`]). A body takes room as its bytes arrive;
    /// one that cannot get room before its read deadline gets 503.
    pub max_body_bytes_in_flight: usize,
    /// Time to read the request headers of a connection, and the longest a connection stays
    /// open without a request in progress (default 30 s).
    pub header_read_timeout: Duration,
    /// Streams running at once (default 1024); more get 503.
    pub max_streams: usize,
    /// Streams running at once per token (default 64); more get 503.
    pub max_streams_per_token: usize,
    /// Open connections (default 4096); more are closed on accept.
    pub max_connections: usize,
    /// Connections without a request in progress (idle, or still sending a request head), all
    /// peers together (default 1024); a new connection over it is closed on accept. When more
    /// than half are idle, idle connections are closed after
    /// [`Limits::idle_timeout_under_pressure`] instead of [`Limits::header_read_timeout`].
    pub max_idle_connections: usize,
    /// Idle connections one peer IP address may hold on the normal timeout (default 256). A
    /// peer over it gets new connections on [`Limits::idle_timeout_under_pressure`], and none
    /// while more than half of [`Limits::max_idle_connections`] are idle. Behind a reverse
    /// proxy every connection comes from its address: raise this to its pool size.
    pub max_idle_connections_per_peer: usize,
    /// How long a connection may be idle or send its request head while more than half of
    /// [`Limits::max_idle_connections`] are idle (default 2 s).
    pub idle_timeout_under_pressure: Duration,
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
    /// Requests per minute each token may make (default none: no limit); more get 429.
    pub requests_per_minute: Option<u64>,
    /// Tokens (input, output and cache, as the upstream reports them) each token may use per
    /// day (default none: no limit). Checked before the upstream is called: a spent budget
    /// gets 429, and `maxTokens` is cut to what is left. A stream that ends without usage
    /// (client gone) is charged its `maxTokens`.
    pub tokens_per_day: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 8 * 1024 * 1024,
            body_read_timeout: Duration::from_secs(10),
            max_body_bytes_in_flight: 64 * 1024 * 1024,
            header_read_timeout: Duration::from_secs(30),
            max_streams: 1024,
            max_streams_per_token: 64,
            max_connections: 4096,
            max_idle_connections: 1024,
            max_idle_connections_per_peer: 256,
            idle_timeout_under_pressure: Duration::from_secs(2),
            upstream_timeout: Duration::from_secs(600),
            upstream_headers_timeout: Duration::from_secs(60),
            upstream_idle_timeout: Duration::from_secs(120),
            keepalive_interval: Duration::from_secs(15),
            shutdown_grace: Duration::from_secs(30),
            retry_after_secs: 1,
            requests_per_minute: None,
            tokens_per_day: None,
        }
    }
}

/// Request headers a client may never set, whatever the allow-list says.
pub const FORBIDDEN_HEADERS: [&str; 6] =
    ["authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "cookie", "host"];

/// `samplingParams` keys allowed by default: sampling knobs only, nothing that could change
/// the model, the messages or the billing of a request (so no `n`, `best_of` or `logprobs`,
/// which multiply or add to the output the server pays for).
pub const DEFAULT_SAMPLING_PARAMS: [&str; 8] =
    ["top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty", "seed", "stop"];

/// The credentials the server keeps out of everything it sends a client (error texts, events,
/// refusals): its bearer tokens, the values of the environment variables in [`Redaction::env`]
/// (read when the server starts), credential-like headers (`authorization`, `*key*`, `*token*`,
/// `*secret*`, `cookie`) of the served models, and what [`Redaction::add`] was given. A `Bearer`
/// token in an error text is redacted whatever it is. `Debug` prints the variable names only.
#[derive(Clone, Default)]
pub struct Redaction {
    /// Environment variables holding credentials (default: every provider's key variables of
    /// the catalog and the AWS credentials; [`ServerConfig::load`] adds `apiKeyEnv` and
    /// `tokenEnv` of the file).
    pub env: Vec<String>,
    secrets: Vec<String>,
}

impl Redaction {
    /// Also redact `secret` (a key the registry holds in code, say `Auth::ApiKey`).
    pub fn add(&mut self, secret: impl Into<String>) {
        self.secrets.push(secret.into());
    }

    /// The default list: see [`Redaction::env`].
    pub fn with_default_env() -> Self {
        let mut env: Vec<String> = ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        for id in pi_providers::catalog::provider_ids() {
            env.extend(pi_providers::registry::env_api_key_vars(id).into_iter().map(str::to_owned));
        }
        env.sort();
        env.dedup();
        Self { env, secrets: Vec::new() }
    }

    /// Every credential named here, as it is now.
    fn values(&self) -> Vec<String> {
        let from_env = self.env.iter().filter_map(|name| std::env::var(name).ok());
        from_env.chain(self.secrets.iter().cloned()).filter(|v| !v.is_empty()).collect()
    }
}

impl fmt::Debug for Redaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redaction").field("env", &self.env).field("secrets", &self.secrets.len()).finish()
    }
}

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
    /// Credentials redacted from everything sent to clients.
    pub redaction: Redaction,
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
            redaction: Redaction::with_default_env(),
        }
    }
}

/// The axum router of the server (for embedding in an application; [`serve`] runs it with
/// connection limits and graceful shutdown).
pub fn router(config: ServerConfig) -> axum::Router {
    handler::router(config, tokio_util::sync::CancellationToken::new())
}
