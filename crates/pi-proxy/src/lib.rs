//! Streaming pi assistant messages through a proxy that keeps the provider keys.
//!
//! An application whose agents must not hold provider API keys streams through a proxy:
//! [`ProxyStreamFn`] is a [`pi_types::StreamFn`] (usable anywhere a provider is) that sends
//! `{model, context, options}` to `{proxy_url}/api/stream` and rebuilds the assistant message
//! from the server's stripped events, exactly as the reference's `streamProxy`
//! (`@earendil-works/pi-agent-core` 1.6.0) does. The protocol is in [`wire`].
//!
//! With the cargo feature `server`, `pi_proxy::server` is the other end: an axum server that
//! authenticates bearer tokens, checks every request against its own `pi_providers::Models`
//! registry (the keys never go where a client points), limits body sizes, concurrent streams
//! and upstream time, and cancels the upstream request when the client goes away.
//!
//! ```
//! use std::sync::Arc;
//! use pi_providers::api::pi_messages::{Protocol, WireEvent};
//! use pi_types::{AssistantMessage, AssistantMessageEvent};
//! // What the server sends for a text delta: the partial message is stripped.
//! let event = AssistantMessageEvent::TextDelta {
//!     content_index: 0,
//!     delta: "Hi".into(),
//!     partial: Arc::new(AssistantMessage::default()),
//! };
//! let line = serde_json::to_string(&WireEvent::from_event(&event, Protocol::Proxy)).unwrap();
//! assert_eq!(line, r#"{"type":"text_delta","contentIndex":0,"delta":"Hi"}"#);
//! ```

mod client;
#[cfg(feature = "server")]
pub mod server;
pub mod wire;

pub use client::{ProxyStreamFn, DEFAULT_TIMEOUT_MS, MODELS_TIMEOUT};

/// Errors of the proxy crate's own setup (request failures are `error` events, never these).
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The server configuration is unusable.
    #[error("proxy configuration: {0}")]
    Config(String),
    /// A socket operation failed.
    #[error("proxy I/O: {0}")]
    Io(#[from] std::io::Error),
    /// A request to the proxy other than a stream failed ([`ProxyStreamFn::models`]).
    #[error("{0}")]
    Request(String),
}
