//! What carries a request and its response: the HTTP client and its settings, the request
//! and body-read machinery the adapters share, the client identity headers, the SSE decoder and
//! the WebSocket client.

#[cfg(feature = "http")]
pub mod client;
#[cfg(feature = "http")]
pub(crate) mod http;
pub mod identity;
#[cfg(feature = "http")]
pub mod redact;
pub mod sse;
#[cfg(feature = "http")]
pub(crate) mod websocket;
