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

#[cfg(feature = "http")]
mod common;
#[cfg(feature = "http")]
mod http;
// Parsing helpers shared by the faux provider and the adapters; some are the adapters' only.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
mod jsonx;
#[cfg(feature = "http")]
mod transform;

#[cfg(feature = "http")]
pub mod anthropic;
pub mod catalog;
pub mod classify;
pub mod cost;
#[cfg(feature = "http")]
pub mod google;
pub mod identity;
#[cfg(feature = "http")]
pub mod openai_completions;
#[cfg(feature = "http")]
pub mod openai_responses;
pub mod registry;
// The thinking-level helpers the adapters share (crate-private ones are unused without them).
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub mod simple;
pub mod sse;

pub use classify::{is_context_overflow, is_recoverable_length, is_retryable_error};
pub use cost::calculate_cost;
pub use pi_types::StreamFn;
pub use registry::{env_api_key, Auth, Models, Provider, ProviderError};
