//! Provider registry and streaming adapters for pi.
//!
//! Four HTTP adapters reproduce `@earendil-works/pi-ai` 1.6.0 event for event:
//! [`openai_completions`], [`anthropic`], [`openai_responses`] and [`google`]. Each is a
//! [`pi_types::StreamFn`]: it never fails synchronously, makes its connection inside the
//! returned stream and ends it with exactly one `done` or `error` event. The [`registry`]
//! resolves a provider, its authentication and the adapter for a model's API, like the
//! reference's `createModels` / `createProvider`; a built-in [`catalog`] lists the models of
//! the main providers. The [`faux`] provider is a scripted stand-in for tests.
//!
//! See `docs/providers.md` for the SSE decoder, retry, timeout and compatibility rules.

pub mod faux;

mod common;
mod http;
mod jsonx;
mod transform;

pub mod anthropic;
pub mod catalog;
pub mod classify;
pub mod cost;
pub mod google;
pub mod identity;
pub mod openai_completions;
pub mod openai_responses;
pub mod registry;
pub mod simple;
pub mod sse;

pub use classify::{is_context_overflow, is_recoverable_length, is_retryable_error};
pub use cost::calculate_cost;
/// The shared HTTP client and the default idle limit, for crates that stream over HTTP
/// themselves (the proxy client) with the adapters' settings.
pub use http::{client as http_client, DEFAULT_IDLE_TIMEOUT_MS};
pub use pi_types::StreamFn;
pub use registry::{env_api_key, Auth, Models, Provider, ProviderError};
